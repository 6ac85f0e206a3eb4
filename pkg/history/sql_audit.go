package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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
	if _, err := tx.ExecContext(ctx, s.d.rebind("DELETE FROM runners WHERE updated_at < ?"), before); err != nil {
		return 0, 0, fmt.Errorf("pruning runner facts: %w", err)
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
