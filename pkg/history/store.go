package history

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors callers tell apart with errors.Is. Every other error is wrapped with what the store was
// doing.
var (
	// ErrNotFound: no job record has that ID.
	ErrNotFound = errors.New("not found")
	// ErrSealed: the job record carries its signed envelope and is never changed again.
	ErrSealed = errors.New("job record is sealed")
	// ErrInvalid: the record, entry or query cannot be stored or run as given.
	ErrInvalid = errors.New("invalid")
	// ErrSchemaTooNew: the database was migrated by a newer HyperFleet than this one.
	ErrSchemaTooNew = errors.New("database schema is newer than this HyperFleet")
)

// Limits on how many rows one query returns.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Store keeps job records and the audit log. Implementations are safe for concurrent use.
type Store interface {
	// UpsertJob merges r into the job's record: non-zero fields overwrite, nil times keep the
	// stored ones, so recorders may write what they learn piece by piece, in any order. A record
	// with Envelope set is sealed: later upserts of it are refused with ErrSealed, since a signed
	// record is never changed.
	//
	// A record that names its Runner and Namespace also gets what UpsertRunner learned about
	// that runner's VM.
	UpsertJob(ctx context.Context, r JobRecord) error
	// UpsertRunner merges what a recorder learned about a runner's VM (facts' VM, Template,
	// Identity and the VM's times: VMRequested, Cloned, Booted, Attested, VMDestroyed; every other
	// field is ignored) into what is kept for the runner, and into the record of the job it took
	// if that record is known and not sealed, whose ID it returns ("" when there is none yet: the
	// facts join the job's record when UpsertJob names the runner).
	UpsertRunner(ctx context.Context, namespace, runner string, facts JobRecord) (jobID string, err error)
	// Job returns one record, or ErrNotFound.
	Job(ctx context.Context, id string) (JobRecord, error)
	// Unfinished returns the IDs of the records no completion reached: not sealed, with neither
	// an outcome nor a finish time, whose VM was destroyed before destroyedBefore. At most limit
	// (MaxLimit when 0 or more), the longest-destroyed first.
	Unfinished(ctx context.Context, destroyedBefore time.Time, limit int) ([]string, error)
	// Jobs lists records newest first (by JobTimes.SortTime, then ID).
	Jobs(ctx context.Context, q JobQuery) ([]JobRecord, error)
	// AppendAudit adds an entry and returns its ID. There is no way to change or delete one
	// entry; only Prune removes old ones.
	AppendAudit(ctx context.Context, e AuditEntry) (int64, error)
	// Audit lists entries newest first.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// Percentiles summarises the jobs of each namespace and pool whose SortTime is in [From, To).
	Percentiles(ctx context.Context, q StatsQuery) ([]PoolStats, error)
	// Prune deletes the job records not written since olderThan, the audit entries older than
	// it and the runner facts not written since, and says how many job records and audit
	// entries went.
	Prune(ctx context.Context, olderThan time.Time) (jobs, audit int64, err error)
	// Close releases the database.
	Close() error
}

// JobQuery selects job records. Zero fields do not filter.
type JobQuery struct {
	// Namespaces limits the records to these namespaces; empty means all. The caller decides
	// which namespaces a reader may see.
	Namespaces []string
	Pool       string
	Repository string
	Outcome    Outcome
	// From and To bound SortTime to [From, To).
	From, To time.Time
	// Limit is the most records returned: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Before is the Cursor of the last record of the previous page.
	Before string
}

// AuditQuery selects audit entries. Zero fields do not filter.
type AuditQuery struct {
	// Namespaces limits the entries to objects in these namespaces; empty means all, including
	// cluster-scoped objects, which a restricted query never sees.
	Namespaces []string
	// Actor is the actor's subject.
	Actor string
	// Kind and Name are the object's.
	Kind, Name string
	// From and To bound Time to [From, To).
	From, To time.Time
	// Limit is the most entries returned: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Before returns only entries with a smaller ID: the ID of the last entry of the previous
	// page.
	Before int64
}

// StatsQuery selects the jobs Percentiles summarises. Zero fields do not filter.
type StatsQuery struct {
	Namespaces []string
	Pool       string
	// From and To bound SortTime to [From, To).
	From, To time.Time
}

// PoolStats summarises one pool's jobs.
type PoolStats struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	Count     int64  `json:"count"`
	// Pickup is how long jobs waited for a runner: JobStarted - Queued.
	Pickup Percentiles `json:"pickup"`
	// Duration is how long jobs ran: JobFinished - JobStarted.
	Duration Percentiles `json:"duration"`
	// Outcomes counts the jobs by outcome; jobs whose outcome is not known yet are not counted.
	Outcomes map[Outcome]int64 `json:"outcomes"`
}

// Percentiles of a duration over the jobs that had both times, by nearest rank.
type Percentiles struct {
	Samples int64         `json:"samples"`
	P50     time.Duration `json:"p50"`
	P90     time.Duration `json:"p90"`
	P99     time.Duration `json:"p99"`
}

// Cursor is the JobQuery.Before that continues a listing after r.
func (r JobRecord) Cursor() string {
	key := strconv.FormatInt(r.Times.SortTime().UnixMicro(), 10) + ":" + r.ID
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// parseCursor reads a Cursor back into its sort time and ID.
func parseCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: cursor %q", ErrInvalid, c)
	}
	micros, id, ok := strings.Cut(string(b), ":")
	us, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", fmt.Errorf("%w: cursor %q", ErrInvalid, c)
	}
	return time.UnixMicro(us).UTC(), id, nil
}

func limit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}

// Open opens the store a URL names: sqlite:///path/to/file.db, or postgres:// or postgresql://
// with a libpq connection URL. It brings the database's schema up to date.
func Open(ctx context.Context, url string) (Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		path := strings.TrimPrefix(url, "sqlite://")
		if path == "" {
			return nil, fmt.Errorf("%w: %q names no file", ErrInvalid, url)
		}
		return OpenSQLite(path)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return OpenPostgres(ctx, url)
	}
	return nil, fmt.Errorf("%w: history database URL %q: want sqlite:///path or postgres://", ErrInvalid, url)
}
