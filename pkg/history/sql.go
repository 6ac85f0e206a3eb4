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

const auditColumns = `id, at, actor_subject, actor_groups, actor_kind, action, api_version, kind, namespace, name, result, reason, detail`

func (s *sqlStore) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	e, err := prepareAudit(e, s.now())
	if err != nil {
		return 0, err
	}
	var groups any
	if len(e.Actor.Groups) > 0 {
		b, _ := json.Marshal(e.Actor.Groups) // a []string always marshals
		groups = string(b)
	}
	q := "INSERT INTO audit (" + strings.TrimPrefix(auditColumns, "id, ") + ") VALUES (" + placeholders(12) + ") RETURNING id"
	var id int64
	err = s.w.QueryRowContext(ctx, s.d.rebind(q), s.d.timeArg(e.Time), e.Actor.Subject, groups, string(e.Actor.Kind), e.Action,
		e.Object.APIVersion, e.Object.Kind, e.Object.Namespace, e.Object.Name, e.Result, e.Reason, e.Detail).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("appending audit entry %s %s %s/%s: %w", e.Action, e.Object.Kind, e.Object.Namespace, e.Object.Name, err)
	}
	return id, nil
}

func (s *sqlStore) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	f := &filter{d: s.d}
	f.in("namespace", q.Namespaces)
	f.equal("actor_subject", q.Actor)
	f.equal("kind", q.Kind)
	f.equal("name", q.Name)
	f.between("at", q.From, q.To)
	if q.Before > 0 {
		f.add("id < ?", q.Before)
	}
	query := "SELECT " + auditColumns + " FROM audit" + f.String() + " ORDER BY id DESC LIMIT " + strconv.Itoa(limit(q.Limit))
	rows, err := s.r.QueryContext(ctx, s.d.rebind(query), f.args...)
	if err != nil {
		return nil, fmt.Errorf("listing audit entries: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e      AuditEntry
			at     nullTime
			groups sql.NullString
			kind   string
		)
		if err := rows.Scan(&e.ID, &at, &e.Actor.Subject, &groups, &kind, &e.Action, &e.Object.APIVersion, &e.Object.Kind,
			&e.Object.Namespace, &e.Object.Name, &e.Result, &e.Reason, &e.Detail); err != nil {
			return nil, fmt.Errorf("listing audit entries: %w", err)
		}
		e.Time, e.Actor.Kind = at.Time, ActorKind(kind)
		if groups.Valid && groups.String != "" {
			if err := json.Unmarshal([]byte(groups.String), &e.Actor.Groups); err != nil {
				return nil, fmt.Errorf("audit entry %d: groups: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing audit entries: %w", err)
	}
	return out, nil
}

func (s *sqlStore) Percentiles(ctx context.Context, q StatsQuery) ([]PoolStats, error) {
	f := &filter{d: s.d}
	f.in("namespace", q.Namespaces)
	f.equal("pool", q.Pool)
	f.between("sort_at", q.From, q.To)
	query := "SELECT namespace, pool, queued_at, job_started_at, job_finished_at, outcome FROM jobs" + f.String()
	rows, err := s.r.QueryContext(ctx, s.d.rebind(query), f.args...)
	if err != nil {
		return nil, fmt.Errorf("reading job times: %w", err)
	}
	defer rows.Close()
	var samples []statSample
	for rows.Next() {
		var (
			sm                        statSample
			queued, started, finished nullTime
			outcome                   string
		)
		if err := rows.Scan(&sm.namespace, &sm.pool, &queued, &started, &finished, &outcome); err != nil {
			return nil, fmt.Errorf("reading job times: %w", err)
		}
		sm.queued, sm.started, sm.finished, sm.outcome = queued.ptr(), started.ptr(), finished.ptr(), Outcome(outcome)
		samples = append(samples, sm)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading job times: %w", err)
	}
	return summarise(samples), nil
}

func (s *sqlStore) Prune(ctx context.Context, olderThan time.Time) (jobs, audit int64, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("pruning history: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	before := s.d.timeArg(olderThan)
	res, err := tx.ExecContext(ctx, s.d.rebind("DELETE FROM jobs WHERE updated_at < ?"), before)
	if err != nil {
		return 0, 0, fmt.Errorf("pruning job records: %w", err)
	}
	if jobs, err = res.RowsAffected(); err != nil {
		return 0, 0, fmt.Errorf("pruning job records: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.allowAuditDelete); err != nil {
		return 0, 0, fmt.Errorf("pruning audit entries: %w", err)
	}
	res, err = tx.ExecContext(ctx, s.d.rebind("DELETE FROM audit WHERE at < ?"), before)
	if err != nil {
		return 0, 0, fmt.Errorf("pruning audit entries: %w", err)
	}
	if audit, err = res.RowsAffected(); err != nil {
		return 0, 0, fmt.Errorf("pruning audit entries: %w", err)
	}
	if s.d.endAuditDelete != "" {
		if _, err := tx.ExecContext(ctx, s.d.endAuditDelete); err != nil {
			return 0, 0, fmt.Errorf("pruning audit entries: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("pruning history: %w", err)
	}
	return jobs, audit, nil
}

func (s *sqlStore) Close() error { return s.close() }
