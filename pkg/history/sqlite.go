package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

var sqliteDialect = &dialect{
	name:                "sqlite",
	schemaMigrationsDDL: "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
	timeArg:             func(t time.Time) any { return t.UnixMicro() },
	// SQLite has one writer at a time and every write transaction starts IMMEDIATE, so the version
	// read inside a step's transaction is enough: a second opener waits for the first's step to
	// commit and then finds it applied.
	lockMigrations: func(context.Context, *sql.Conn) (func(), error) { return func() {}, nil },
	// The audit table's delete trigger lets a delete through only while this flag table has a
	// row, which Prune inserts and removes inside its own transaction: no other connection ever
	// sees it.
	allowAuditDelete: "INSERT INTO audit_prune (pruning) VALUES (1)",
	endAuditDelete:   "DELETE FROM audit_prune",
	retryable:        func(error) bool { return false },
}

// sqliteBusyTimeout is how long a connection waits for another's lock before failing: the writer
// for another process's writer, a migration for another opener's.
const sqliteBusyTimeout = 10 * time.Second

// OpenSQLite opens (creating it if missing) the SQLite database at path and brings its schema up
// to date. The database runs in WAL mode: one writer at a time, readers never blocked by it.
func OpenSQLite(path string) (Store, error) {
	return openSQLite(path, nil)
}

// openSQLite opens the database migrated to the last of ms, or of all steps when ms is nil.
func openSQLite(path string, ms []migration) (Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("%w: SQLite path %q: want a file name without ? or #", ErrInvalid, path)
	}
	if ms == nil {
		var err error
		if ms, err = loadMigrations("sqlite"); err != nil {
			return nil, err
		}
	}
	busy := fmt.Sprintf("_busy_timeout=%d", sqliteBusyTimeout.Milliseconds())
	w, err := sql.Open("sqlite", path+"?"+busy+"&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("opening SQLite history database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrateSQLite(ctx, w, ms); err != nil {
		w.Close()
		return nil, fmt.Errorf("SQLite history database %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+busy+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening SQLite history database %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return &sqlStore{
		d: sqliteDialect, w: w, r: r, now: time.Now,
		close: func() error { return errors.Join(r.Close(), w.Close()) },
	}, nil
}

// sqliteBusy is SQLite's SQLITE_BUSY result code.
const sqliteBusy = 5

// migrateSQLite migrates, trying again while another opener holds the database: a connection's
// switch to WAL mode as it opens takes the database for itself and fails at once with SQLITE_BUSY,
// without waiting out the busy timeout, when another process opens the same new file at that moment
// (the local fleet's manager and console do).
func migrateSQLite(ctx context.Context, w *sql.DB, ms []migration) error {
	for attempt := 1; ; attempt++ {
		err := migrate(ctx, w, sqliteDialect, ms)
		var coded interface{ Code() int }
		if err == nil || attempt == 40 || !errors.As(err, &coded) || coded.Code()&0xff != sqliteBusy {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}
