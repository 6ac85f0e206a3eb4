package history

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// testMigrations: a new database gets every step; one at version 1 is brought to the last with its
// data kept; one at a version this binary does not know is refused; openers racing on a new
// database apply each step once.
func testMigrations(t *testing.T, b backend) {
	ctx := context.Background()
	all, err := loadMigrations(b.d.name)
	if err != nil {
		t.Fatal(err)
	}
	latest := all[len(all)-1].version
	if latest < 2 {
		t.Fatalf("%s has %d migrations; the upgrade test needs two", b.d.name, latest)
	}
	state := func(g *WithT, where string) (version, rows int, indexed bool) {
		s, err := b.open(ctx, where, all)
		g.Expect(err).NotTo(HaveOccurred())
		defer s.Close()
		db := s.(*sqlStore).r
		g.Expect(db.QueryRowContext(ctx, "SELECT MAX(version), COUNT(*) FROM schema_migrations").Scan(&version, &rows)).To(Succeed())
		var n int
		g.Expect(db.QueryRowContext(ctx, b.indexExists, "jobs_sort").Scan(&n)).To(Succeed())
		return version, rows, n == 1
	}

	t.Run("Fresh", func(t *testing.T) {
		g := NewWithT(t)
		where := b.newDatabase(t)
		version, rows, indexed := state(g, where)
		g.Expect([]int{version, rows}).To(Equal([]int{latest, latest}))
		g.Expect(indexed).To(BeTrue())
	})

	t.Run("UpgradeFromVersion1", func(t *testing.T) {
		g := NewWithT(t)
		where := b.newDatabase(t)
		old, err := b.open(ctx, where, all[:1])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(old.UpsertJob(ctx, JobRecord{ID: "github/1", Namespace: "ns", Times: JobTimes{Queued: at(0)}})).To(Succeed())
		var n int
		g.Expect(old.(*sqlStore).r.QueryRowContext(ctx, b.indexExists, "jobs_sort").Scan(&n)).To(Succeed())
		g.Expect(n).To(BeZero(), "version 1 has no jobs_sort index")
		g.Expect(old.Close()).To(Succeed())

		version, rows, indexed := state(g, where)
		g.Expect([]int{version, rows}).To(Equal([]int{latest, latest}))
		g.Expect(indexed).To(BeTrue())
		s, err := b.open(ctx, where, nil)
		g.Expect(err).NotTo(HaveOccurred())
		defer s.Close()
		r, err := s.Job(ctx, "github/1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Namespace).To(Equal("ns"))
	})

	t.Run("RefusesNewerSchema", func(t *testing.T) {
		g := NewWithT(t)
		where := b.newDatabase(t)
		s, err := b.open(ctx, where, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Close()).To(Succeed())
		g.Expect(b.raw(t, where)("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", latest+7, b.d.timeArg(t0))).To(Succeed())
		_, err = b.open(ctx, where, nil)
		g.Expect(err).To(MatchError(ErrSchemaTooNew))
		g.Expect(err).To(MatchError(ContainSubstring("schema version %d", latest+7)))
	})

	t.Run("ConcurrentOpeners", func(t *testing.T) {
		g := NewWithT(t)
		where := b.newDatabase(t)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				s, err := b.open(ctx, where, nil)
				if err == nil {
					err = s.Close()
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			g.Expect(err).NotTo(HaveOccurred())
		}
		version, rows, _ := state(g, where)
		g.Expect([]int{version, rows}).To(Equal([]int{latest, latest}), "each step applied once")
	})
}
