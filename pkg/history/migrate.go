package history

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFiles holds each backend's schema as numbered steps: migrations/<backend>/NNNN_name.sql.
// A step is never edited once released; a change to the schema is a new step.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads a backend's steps in order of their version.
func loadMigrations(backend string) ([]migration, error) {
	dir := path.Join("migrations", backend)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s migrations: %w", backend, err)
	}
	var ms []migration
	for _, e := range entries {
		number, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(number)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s/%s is not named NNNN_name.sql", dir, e.Name())
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("%s migrations: %s is not version %d; versions must run 1, 2, 3 without gaps", backend, m.name, i+1)
		}
	}
	return ms, nil
}

// migrate brings the database up to the last of ms. Each step runs in its own transaction with its
// row in schema_migrations, so a step is either applied and recorded or neither. The dialect's lock
// keeps concurrent openers from applying a step twice; a database already past the last step this
// binary knows is refused, since this binary cannot know what the newer schema means.
func migrate(ctx context.Context, db *sql.DB, d *dialect, ms []migration) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrating the history database: %w", err)
	}
	defer conn.Close()
	unlock, err := d.lockMigrations(ctx, conn)
	if err != nil {
		return fmt.Errorf("locking the history database for migration: %w", err)
	}
	defer unlock()
	if _, err := conn.ExecContext(ctx, d.schemaMigrationsDDL); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	latest := ms[len(ms)-1].version
	for _, m := range ms {
		if err := applyMigration(ctx, conn, d, m, latest); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless the database is already at or past it. It reads the version
// inside the step's transaction, so an opener that lost a race finds the step done.
func applyMigration(ctx context.Context, conn *sql.Conn, d *dialect, m migration, latest int) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("%w: the history database is at schema version %d, this HyperFleet knows versions up to %d; run a HyperFleet at least as new as the one that migrated it", ErrSchemaTooNew, current, latest)
	}
	if current >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, d.rebind("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"), m.version, d.timeArg(time.Now())); err != nil {
		return fmt.Errorf("recording migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migration %s: %w", m.name, err)
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion is the last step applied, 0 for a new database.
func schemaVersion(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return int(v.Int64), nil
}
