package history

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Run with: go test -run - -bench . ./pkg/history/

func BenchmarkSQLite(b *testing.B) { benchmarkStore(b, sqliteBackend()) }

func BenchmarkPostgres(b *testing.B) {
	backend, _ := postgresBackend(b)
	benchmarkStore(b, backend)
}

func benchmarkStore(b *testing.B, be backend) {
	ctx := context.Background()
	s, err := be.open(ctx, be.newDatabase(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	b.Run("UpsertJob", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			// Three pieces of each job, as recorders write them.
			id := fmt.Sprintf("github/%d", i/3)
			r := JobRecord{ID: id, Namespace: "team-a", Pool: "linux"}
			switch i % 3 {
			case 0:
				r.Times.Queued = at(time.Duration(i) * time.Second)
			case 1:
				r.Times.JobStarted = at(time.Duration(i) * time.Second)
			case 2:
				r.Outcome = OutcomeSucceeded
			}
			if err := s.UpsertJob(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Jobs", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Jobs(ctx, JobQuery{Namespaces: []string{"team-a"}, Limit: 100}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
