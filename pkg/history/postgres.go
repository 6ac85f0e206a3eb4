package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// migrationLockKey is the advisory lock HyperFleet's history migrations hold on PostgreSQL
// ("HFhistry" as a number), so that replicas starting together apply each step once.
const migrationLockKey int64 = 0x4846_6869_7374_7279

var postgresDialect = &dialect{
	name:                "postgres",
	numbered:            true,
	forUpdate:           " FOR UPDATE",
	schemaMigrationsDDL: "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)",
	timeArg:             func(t time.Time) any { return t.UTC() },
	lockMigrations: func(ctx context.Context, conn *sql.Conn) (func(), error) {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
			return nil, err
		}
		return func() {
			// Closing the connection releases the lock too, should this fail.
			_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLockKey)
		}, nil
	},
	// The audit table's trigger lets a delete through only while this transaction-local setting
	// is on.
	allowAuditDelete: "SET LOCAL hyperfleet.audit_prune = 'on'",
	retryable: func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "23505" // unique_violation
	},
}

// OpenPostgres connects a pool to the PostgreSQL database dsn names (a postgres:// URL or a libpq
// keyword/value string) and brings its schema up to date.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	return openPostgres(ctx, dsn, nil)
}

// openPostgres opens the database migrated to the last of ms, or of all steps when ms is nil.
func openPostgres(ctx context.Context, dsn string, ms []migration) (Store, error) {
	if ms == nil {
		var err error
		if ms, err = loadMigrations("postgres"); err != nil {
			return nil, err
		}
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the PostgreSQL history database: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if err := migrate(ctx, db, postgresDialect, ms); err != nil {
		db.Close()
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL history database: %w", err)
	}
	return &sqlStore{
		d: postgresDialect, w: db, r: db, now: time.Now,
		close: func() error {
			err := db.Close()
			pool.Close()
			return err
		},
	}, nil
}
