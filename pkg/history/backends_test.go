package history

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/pgtest"
)

// backend is one database the conformance suite runs against.
type backend struct {
	d *dialect
	// newDatabase makes a new, empty database and returns what open takes.
	newDatabase func(t testing.TB) string
	// open opens the store migrated to the last of ms (all steps when nil).
	open func(ctx context.Context, where string, ms []migration) (Store, error)
	// raw runs a statement on the database beside the store, as an operator or a bug would.
	raw func(t *testing.T, where string) func(query string, args ...any) error
	// indexExists is a query counting the indexes of a name.
	indexExists string
}

func sqliteBackend() backend {
	return backend{
		d:           sqliteDialect,
		newDatabase: func(t testing.TB) string { return filepath.Join(t.TempDir(), "history.db") },
		open: func(_ context.Context, path string, ms []migration) (Store, error) {
			return openSQLite(path, ms)
		},
		raw: func(t *testing.T, path string) func(string, ...any) error {
			db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return func(q string, args ...any) error {
				_, err := db.ExecContext(context.Background(), q, args...)
				return err
			}
		},
		indexExists: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?",
	}
}

func postgresBackend(t testing.TB) (backend, *pgtest.Server) {
	start := time.Now()
	server := pgtest.NewServer(t)
	t.Logf("PostgreSQL started in %s", time.Since(start).Round(time.Millisecond))
	return backend{
		d:           postgresDialect,
		newDatabase: func(t testing.TB) string { return server.CreateDatabase(t) },
		open:        openPostgres,
		raw: func(t *testing.T, dsn string) func(string, ...any) error {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return func(q string, args ...any) error {
				_, err := pool.Exec(context.Background(), postgresDialect.rebind(q), args...)
				return err
			}
		},
		indexExists: "SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1",
	}, server
}

func TestSQLite(t *testing.T) {
	runConformance(t, sqliteBackend())
}

func TestPostgres(t *testing.T) {
	b, server := postgresBackend(t)
	runConformance(t, b)
	t.Run("Outage", func(t *testing.T) { testOutage(t, b, server) })
}

// testOutage: while the database is down the store reports errors, and once it is back the same
// store works again without being reopened.
func testOutage(t *testing.T, b backend, server *pgtest.Server) {
	g := NewWithT(t)
	ctx := context.Background()
	s, err := b.open(ctx, b.newDatabase(t), nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/before", Namespace: "ns"})).To(Succeed())

	server.Stop(t)
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = s.UpsertJob(short, JobRecord{ID: "github/during", Namespace: "ns"})
	g.Expect(err).To(MatchError(ContainSubstring("storing job github/during")))
	_, err = s.Jobs(short, JobQuery{})
	g.Expect(err).To(HaveOccurred())

	server.Restart(t)
	g.Eventually(func() error {
		return s.UpsertJob(ctx, JobRecord{ID: "github/after", Namespace: "ns"})
	}).WithTimeout(10 * time.Second).Should(Succeed())
	jobs, err := s.Jobs(ctx, JobQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(2), "what was committed before the outage is still there")
}
