package console

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// AuditList is a page of the audit log, newest first.
type AuditList struct {
	Items []history.AuditEntry `json:"items"`
	// Next is the before= that continues the listing; empty on the last page.
	Next string `json:"next,omitempty"`
	// Dropped counts the entries this console lost to a full queue since it started.
	Dropped int64 `json:"dropped"`
}

// errAuditUnavailable titles the answer of an audit log that cannot be read.
const errAuditUnavailable = "Audit log unavailable"

// getAudit lists the audit entries of the namespaces the caller may list VMs in, as JSON, or all
// of them as CSV with format=csv.
func (s *Server) getAudit(w http.ResponseWriter, r *http.Request, c *caller) {
	store, err := s.audit.Store()
	if err != nil {
		writeProblem(w, r, http.StatusServiceUnavailable, errAuditUnavailable, err.Error(), nil)
		return
	}
	q, format, fields := auditQueryOf(r.URL.Query())
	if len(fields) > 0 {
		writeProblem(w, r, http.StatusBadRequest, "Invalid filter", fields[0].Field+" "+fields[0].Message, fields)
		return
	}
	namespaces, all, err := s.auditNamespaces(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	if !all && len(namespaces) == 0 {
		if format == "csv" {
			writeAuditCSV(w, nil)
			return
		}
		writeJSON(w, http.StatusOK, AuditList{Items: []history.AuditEntry{}, Dropped: s.audit.Dropped()})
		return
	}
	q.Namespaces = namespaces
	if format == "csv" {
		s.exportAudit(w, r, store, q)
		return
	}
	entries, err := store.Audit(r.Context(), q)
	if err != nil {
		writeProblem(w, r, http.StatusServiceUnavailable, errAuditUnavailable, err.Error(), nil)
		return
	}
	out := AuditList{Items: nonNilSlice(entries), Dropped: s.audit.Dropped()}
	if q.Limit > 0 && len(entries) == q.Limit || q.Limit == 0 && len(entries) == history.DefaultLimit {
		out.Next = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// auditQueryOf reads the filters of an audit listing.
func auditQueryOf(v url.Values) (history.AuditQuery, string, []FieldError) {
	q := history.AuditQuery{Actor: v.Get("actor"), Kind: v.Get("kind"), Name: v.Get("name")}
	var errs []FieldError
	for _, t := range []struct {
		field string
		into  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if raw := v.Get(t.field); raw != "" {
			at, err := time.Parse(time.RFC3339, raw)
			if err != nil {
				errs = append(errs, FieldError{Field: t.field, Message: "must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z"})
			}
			*t.into = at
		}
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > history.MaxLimit {
			errs = append(errs, FieldError{Field: "limit", Message: "must be a whole number from 1 to " + strconv.Itoa(history.MaxLimit)})
		}
		q.Limit = n
	}
	if raw := v.Get("before"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, FieldError{Field: "before", Message: "must be the ID of an entry (the next of the previous page)"})
		}
		q.Before = n
	}
	format := v.Get("format")
	if format != "" && format != "json" && format != "csv" {
		errs = append(errs, FieldError{Field: "format", Message: "must be json or csv"})
	}
	return q, format, errs
}

// auditNamespaces are the namespaces whose entries the caller may read: those they may list
// MachineClaims in, as the VM list decides. all is set, with no namespaces, for a caller who may
// list MachineClaims and Namespaces cluster-wide: they see every entry, cluster-scoped ones too.
// Asked for one namespace, a refusal there is the caller's 403.
func (s *Server) auditNamespaces(ctx context.Context, c client.Client, namespace string) (namespaces []string, all bool, err error) {
	mayList := func(l client.ObjectList, opts ...client.ListOption) (bool, error) {
		err := c.List(ctx, l, append(opts, client.Limit(1))...)
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	}
	if namespace != "" {
		if err := c.List(ctx, &infrav1.MachineClaimList{}, client.InNamespace(namespace), client.Limit(1)); err != nil {
			return nil, false, err
		}
		return []string{namespace}, false, nil
	}
	everyClaim, err := mayList(&infrav1.MachineClaimList{})
	if err != nil {
		return nil, false, err
	}
	if everyClaim {
		if everyNamespace, err := mayList(&corev1.NamespaceList{}); err != nil || everyNamespace {
			return nil, everyNamespace, err
		}
		return s.inventory.Namespaces(), false, nil
	}
	for _, ns := range s.inventory.Namespaces() {
		ok, err := mayList(&infrav1.MachineClaimList{}, client.InNamespace(ns))
		if err != nil {
			return nil, false, err
		}
		if ok {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces, false, nil
}

// exportAudit writes every entry q selects as CSV, newest first, page by page; a limit in q
// bounds the export.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request, store history.Store, q history.AuditQuery) {
	left := q.Limit
	q.Limit = history.MaxLimit
	var entries []history.AuditEntry
	for {
		if left > 0 {
			q.Limit = min(history.MaxLimit, left-len(entries))
		}
		page, err := store.Audit(r.Context(), q)
		if err != nil {
			writeProblem(w, r, http.StatusServiceUnavailable, errAuditUnavailable, err.Error(), nil)
			return
		}
		entries = append(entries, page...)
		if len(page) < q.Limit || left > 0 && len(entries) >= left {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	writeAuditCSV(w, entries)
}

// auditCSVHeader names the columns of the CSV export.
var auditCSVHeader = []string{"id", "time", "actor", "groups", "actorKind", "action", "apiVersion", "kind", "namespace", "name", "result", "detail"}

func writeAuditCSV(w http.ResponseWriter, entries []history.AuditEntry) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="hyperfleet-audit.csv"`)
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write(auditCSVHeader)
	for _, e := range entries {
		_ = cw.Write([]string{strconv.FormatInt(e.ID, 10), e.Time.UTC().Format(time.RFC3339Nano), csvCell(e.Actor.Subject),
			csvCell(strings.Join(e.Actor.Groups, " ")), string(e.Actor.Kind), csvCell(e.Action), csvCell(e.Object.APIVersion),
			csvCell(e.Object.Kind), csvCell(e.Object.Namespace), csvCell(e.Object.Name), csvCell(e.Result), csvCell(e.Detail)})
	}
	cw.Flush()
}

// csvCell keeps a spreadsheet from reading a cell as a formula: an error message or a name a
// person chose is text.
func csvCell(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// auditIsAppendOnly answers every request that would change or delete audit entries: there is no
// such operation. allow lists the methods the path serves.
func auditIsAppendOnly(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeProblem(w, r, http.StatusMethodNotAllowed, "Method not allowed",
			"the audit log is append-only: its entries are never changed or deleted through the console", nil)
	}
}
