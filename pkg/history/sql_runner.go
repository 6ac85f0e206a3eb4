package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const (
	selectRunnerFacts = "SELECT facts FROM runners WHERE namespace = ? AND runner = ?"
	upsertRunnerFacts = "INSERT INTO runners (namespace, runner, facts, updated_at) VALUES (?, ?, ?, ?) " +
		"ON CONFLICT (namespace, runner) DO UPDATE SET facts = excluded.facts, updated_at = excluded.updated_at"
)

// readRunnerFacts reads what is kept about a runner inside tx; the zero record when nothing is.
func (s *sqlStore) readRunnerFacts(ctx context.Context, tx *sql.Tx, namespace, runner string, lock bool) (JobRecord, error) {
	q := selectRunnerFacts
	if lock {
		q += s.d.forUpdate
	}
	var raw string
	err := tx.QueryRowContext(ctx, s.d.rebind(q), namespace, runner).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return JobRecord{}, nil
	}
	if err != nil {
		return JobRecord{}, err
	}
	var facts JobRecord
	if err := json.Unmarshal([]byte(raw), &facts); err != nil {
		return JobRecord{}, fmt.Errorf("runner %s/%s: facts: %w", namespace, runner, err)
	}
	return runnerFacts(facts), nil
}

func (s *sqlStore) UpsertRunner(ctx context.Context, namespace, runner string, facts JobRecord) (string, error) {
	if namespace == "" || runner == "" {
		return "", fmt.Errorf("%w: runner facts need a namespace and a runner name", ErrInvalid)
	}
	var (
		id  string
		err error
	)
	for attempt := 1; ; attempt++ {
		id, err = s.upsertRunnerOnce(ctx, namespace, runner, runnerFacts(facts))
		if err == nil || attempt == 3 || !s.d.retryable(err) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("storing runner %s/%s: %w", namespace, runner, err)
	}
	return id, nil
}

func (s *sqlStore) upsertRunnerOnce(ctx context.Context, namespace, runner string, facts JobRecord) (string, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	stored, err := s.readRunnerFacts(ctx, tx, namespace, runner, true)
	if err != nil {
		return "", err
	}
	merged := runnerFacts(merge(stored, facts))
	raw, err := json.Marshal(merged)
	if err != nil {
		return "", err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if _, err := tx.ExecContext(ctx, s.d.rebind(upsertRunnerFacts), namespace, runner, string(raw), s.d.timeArg(now)); err != nil {
		return "", err
	}
	// A runner takes one job; should a platform ever report two, each gets the facts.
	rows, err := tx.QueryContext(ctx, s.d.rebind("SELECT "+jobColumns+" FROM jobs WHERE namespace = ? AND runner = ? AND envelope IS NULL ORDER BY id"+s.d.forUpdate), namespace, runner)
	if err != nil {
		return "", err
	}
	var jobs []JobRecord
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return "", err
		}
		jobs = append(jobs, j)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return "", err
	}
	id := ""
	for _, j := range jobs {
		j = merge(j, merged)
		j.UpdatedAt = now
		if _, err := tx.ExecContext(ctx, s.d.rebind(updateJob), append(s.jobArgs(j)[1:], j.ID)...); err != nil {
			return "", err
		}
		id = j.ID
	}
	return id, tx.Commit()
}
