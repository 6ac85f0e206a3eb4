package history

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hyperfleet-io/hyperfleet/test/pgtest"
)

// backend is one database the conformance suite runs against.
type backend struct {
	d *dialect
	// newDatabase makes a new, empty database and returns what open takes.
	newDatabase func(t *testing.T) string
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
		newDatabase: func(t *testing.T) string { return filepath.Join(t.TempDir(), "history.db") },
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

func postgresBackend(t *testing.T) backend {
	server := pgtest.NewServer(t)
	return backend{
		d:           postgresDialect,
		newDatabase: func(t *testing.T) string { return server.CreateDatabase(t) },
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
	}
}

func TestSQLite(t *testing.T) {
	runConformance(t, sqliteBackend())
}

func TestPostgres(t *testing.T) {
	runConformance(t, postgresBackend(t))
}
