package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dialect is what differs between the SQL databases the store runs on; the queries themselves are
// written once, with ? placeholders.
type dialect struct {
	name string
	// numbered placeholders: $1, $2 instead of ?.
	numbered bool
	// forUpdate locks the row read before a merge, where the database locks rows.
	forUpdate string
	// schemaMigrationsDDL creates the table of applied steps if it is missing.
	schemaMigrationsDDL string
	// timeArg is how a time is written: SQLite keeps microseconds since the epoch, PostgreSQL a
	// timestamptz.
	timeArg func(time.Time) any
	// lockMigrations keeps concurrent openers from migrating at once.
	lockMigrations func(ctx context.Context, conn *sql.Conn) (unlock func(), err error)
	// allowAuditDelete and endAuditDelete are run around Prune's deletes in its transaction: the
	// audit table's trigger refuses a delete at any other time.
	allowAuditDelete, endAuditDelete string
	// retryable reports a conflict that running the transaction again resolves: two recorders
	// inserting the same new record at once.
	retryable func(error) bool
}

func (d *dialect) rebind(q string) string {
	if !d.numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sqlStore is the Store over database/sql, for both backends. Writes go through w; reads through r,
// which for SQLite is a separate pool of read-only connections so that readers never wait for the
// one writer.
type sqlStore struct {
	d     *dialect
	w, r  *sql.DB
	close func() error
	now   func() time.Time
}

// jobColumnNames are the jobs table's columns in the order jobArgs writes and scanJob reads them.
var jobColumnNames = []string{"id", "namespace", "pool", "platform", "job_id", "job_url", "repository", "labels", "runner",
	"vm_provider", "vm_hypervisor_cluster", "vm_host", "vm_id", "vm_name",
	"template_name", "template_id", "template_digest",
	"spiffe_id", "svid_serial", "svid_fingerprint", "tpm_ek_hash",
	"queued_at", "vm_requested_at", "cloned_at", "booted_at", "attested_at", "job_started_at", "job_finished_at", "vm_destroyed_at",
	"outcome", "failure_reason", "envelope", "sort_at", "updated_at"}

var (
	jobColumns = strings.Join(jobColumnNames, ", ")
	insertJob  = "INSERT INTO jobs (" + jobColumns + ") VALUES (" + placeholders(len(jobColumnNames)) + ")"
	updateJob  = "UPDATE jobs SET " + strings.Join(jobColumnNames[1:], " = ?, ") + " = ? WHERE id = ?"
)

func (s *sqlStore) jobArgs(r JobRecord) []any {
	var labels any
	if len(r.Labels) > 0 {
		b, _ := json.Marshal(r.Labels) // a []string always marshals
		labels = string(b)
	}
	var envelope any
	if len(r.Envelope) > 0 {
		envelope = r.Envelope
	}
	args := []any{r.ID, r.Namespace, r.Pool, r.Platform, r.JobID, r.JobURL, r.Repository, labels, r.Runner,
		r.VM.Provider, r.VM.HypervisorCluster, r.VM.Host, r.VM.VMID, r.VM.Name,
		r.Template.Name, r.Template.ID, r.Template.Digest,
		r.Identity.SPIFFEID, r.Identity.SVIDSerial, r.Identity.SVIDFingerprint, r.Identity.TPMEKHash}
	for _, t := range r.Times.all() {
		if *t == nil {
			args = append(args, nil)
		} else {
			args = append(args, s.d.timeArg(**t))
		}
	}
	return append(args, string(r.Outcome), r.FailureReason, envelope, s.d.timeArg(r.Times.SortTime()), s.d.timeArg(r.UpdatedAt))
}

type scanner interface{ Scan(dest ...any) error }

func scanJob(row scanner) (JobRecord, error) {
	var (
		r        JobRecord
		labels   sql.NullString
		outcome  string
		times    [8]nullTime
		sortAt   nullTime
		updated  nullTime
		envelope []byte
	)
	dest := []any{&r.ID, &r.Namespace, &r.Pool, &r.Platform, &r.JobID, &r.JobURL, &r.Repository, &labels, &r.Runner,
		&r.VM.Provider, &r.VM.HypervisorCluster, &r.VM.Host, &r.VM.VMID, &r.VM.Name,
		&r.Template.Name, &r.Template.ID, &r.Template.Digest,
		&r.Identity.SPIFFEID, &r.Identity.SVIDSerial, &r.Identity.SVIDFingerprint, &r.Identity.TPMEKHash}
	for i := range times {
		dest = append(dest, &times[i])
	}
	dest = append(dest, &outcome, &r.FailureReason, &envelope, &sortAt, &updated)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	if labels.Valid && labels.String != "" {
		if err := json.Unmarshal([]byte(labels.String), &r.Labels); err != nil {
			return r, fmt.Errorf("job %s: labels: %w", r.ID, err)
		}
	}
	for i, t := range r.Times.all() {
		*t = times[i].ptr()
	}
	r.Outcome = Outcome(outcome)
	if len(envelope) > 0 {
		r.Envelope = envelope
	}
	r.UpdatedAt = updated.Time
	return r, nil
}

// nullTime reads a time as either backend returns it: microseconds since the epoch from SQLite, a
// time.Time from PostgreSQL.
type nullTime struct {
	Time  time.Time
	Valid bool
}

func (n *nullTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n = nullTime{}
	case int64:
		*n = nullTime{Time: time.UnixMicro(v).UTC(), Valid: true}
	case time.Time:
		*n = nullTime{Time: v.UTC(), Valid: true}
	default:
		return fmt.Errorf("cannot read %T as a time", src)
	}
	return nil
}

func (n nullTime) ptr() *time.Time {
	if !n.Valid {
		return nil
	}
	t := n.Time
	return &t
}

func (s *sqlStore) UpsertJob(ctx context.Context, r JobRecord) error {
	r, err := prepareJob(r)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err = s.upsertJobOnce(ctx, r)
		if err == nil || attempt == 3 || !s.d.retryable(err) {
			break
		}
	}
	if err != nil && !errors.Is(err, ErrSealed) {
		return fmt.Errorf("storing job %s: %w", r.ID, err)
	}
	return err
}

func (s *sqlStore) upsertJobOnce(ctx context.Context, r JobRecord) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	stored, err := scanJob(tx.QueryRowContext(ctx, s.d.rebind("SELECT "+jobColumns+" FROM jobs WHERE id = ?"+s.d.forUpdate), r.ID))
	exists := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case stored.Sealed():
		return fmt.Errorf("job %s: %w", r.ID, ErrSealed)
	}
	merged := merge(stored, r)
	if merged.Runner != "" && merged.Namespace != "" {
		facts, err := s.readRunnerFacts(ctx, tx, merged.Namespace, merged.Runner, false)
		if err != nil {
			return err
		}
		merged = merge(merged, facts)
	}
	merged.UpdatedAt = s.now().UTC().Truncate(time.Microsecond)
	args := s.jobArgs(merged)
	if exists {
		_, err = tx.ExecContext(ctx, s.d.rebind(updateJob), append(args[1:], r.ID)...)
	} else {
		_, err = tx.ExecContext(ctx, s.d.rebind(insertJob), args...)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (s *sqlStore) Job(ctx context.Context, id string) (JobRecord, error) {
	r, err := scanJob(s.r.QueryRowContext(ctx, s.d.rebind("SELECT "+jobColumns+" FROM jobs WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("reading job %s: %w", id, err)
	}
	return r, nil
}

// filter collects a query's WHERE clause and its arguments.
type filter struct {
	d     *dialect
	where []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	f.where = append(f.where, cond)
	f.args = append(f.args, args...)
}

func (f *filter) equal(column, value string) {
	if value != "" {
		f.add(column+" = ?", value)
	}
}

func (f *filter) in(column string, values []string) {
	if len(values) == 0 {
		return
	}
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	f.add(column+" IN ("+placeholders(len(values))+")", args...)
}

func (f *filter) between(column string, from, to time.Time) {
	if !from.IsZero() {
		f.add(column+" >= ?", f.d.timeArg(from))
	}
	if !to.IsZero() {
		f.add(column+" < ?", f.d.timeArg(to))
	}
}

func (f *filter) String() string {
	if len(f.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.where, " AND ")
}

func (s *sqlStore) Jobs(ctx context.Context, q JobQuery) ([]JobRecord, error) {
	f := &filter{d: s.d}
	f.in("namespace", q.Namespaces)
	f.equal("pool", q.Pool)
	f.equal("repository", q.Repository)
	f.equal("outcome", string(q.Outcome))
	f.between("sort_at", q.From, q.To)
	if q.Before != "" {
		at, id, err := parseCursor(q.Before)
		if err != nil {
			return nil, err
		}
		f.add("(sort_at < ? OR (sort_at = ? AND id < ?))", s.d.timeArg(at), s.d.timeArg(at), id)
	}
	query := "SELECT " + jobColumns + " FROM jobs" + f.String() + " ORDER BY sort_at DESC, id DESC LIMIT " + strconv.Itoa(limit(q.Limit))
	rows, err := s.r.QueryContext(ctx, s.d.rebind(query), f.args...)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	defer rows.Close()
	var out []JobRecord
	for rows.Next() {
		r, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return out, nil
}

func (s *sqlStore) Unfinished(ctx context.Context, destroyedBefore time.Time, n int) ([]string, error) {
	if n <= 0 || n > MaxLimit {
		n = MaxLimit
	}
	query := "SELECT id FROM jobs WHERE envelope IS NULL AND outcome = '' AND job_finished_at IS NULL" +
		" AND vm_destroyed_at IS NOT NULL AND vm_destroyed_at < ? ORDER BY vm_destroyed_at, id LIMIT " + strconv.Itoa(n)
	rows, err := s.r.QueryContext(ctx, s.d.rebind(query), s.d.timeArg(destroyedBefore))
	if err != nil {
		return nil, fmt.Errorf("listing unfinished jobs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("listing unfinished jobs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing unfinished jobs: %w", err)
	}
	return ids, nil
}

func (s *sqlStore) Close() error { return s.close() }
