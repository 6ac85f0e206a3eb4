package console

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// HistoryJob is a job record as listed: the record without its envelope, which only the record's
// own page and its envelope download carry.
type HistoryJob struct {
	history.JobRecord
	// Sealed says the record carries its signed envelope and never changes again.
	Sealed bool `json:"sealed"`
}

// HistoryJobList is a page of job records, newest first.
type HistoryJobList struct {
	Items []HistoryJob `json:"items"`
	// Next is the before= that continues the listing; empty on the last page.
	Next string `json:"next,omitempty"`
}

// errHistoryUnavailable titles the answer of a job history that cannot be read.
const errHistoryUnavailable = "Job history unavailable"

// historyRoutes are the job history's API operations, all reads: job records are written by
// HyperFleet's recorders, never through the console.
func (s *Server) historyRoutes() []route {
	return []route{
		{Method: "GET", Path: "/api/v1/history/jobs", Handler: s.getHistoryJobs},
		{Method: "GET", Path: "/api/v1/history/jobs/{platform}/{id}", Handler: s.getHistoryJob},
		{Method: "GET", Path: "/api/v1/history/stats", Handler: s.getHistoryStats},
	}
}

// registerHistoryReadOnly answers every other method on the job history's paths with 405.
func registerHistoryReadOnly(mux *http.ServeMux) {
	for _, path := range []string{"/api/v1/history/jobs", "/api/v1/history/jobs/{platform}/{id}", "/api/v1/history/stats"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, r, http.StatusMethodNotAllowed, "Method not allowed",
				"the job history is read-only: its records are written by HyperFleet and never changed or deleted through the console", nil)
		})
	}
}

// historyJobOf is a record as listed.
func historyJobOf(r history.JobRecord) HistoryJob {
	sealed := r.Sealed()
	r.Envelope = nil
	return HistoryJob{JobRecord: r, Sealed: sealed}
}

// getHistoryJobs lists the job records of the namespaces the caller may list MachineClaims in, as
// JSON, or all that the filters select as CSV with format=csv.
func (s *Server) getHistoryJobs(w http.ResponseWriter, r *http.Request, c *caller) {
	store, err := s.audit.Store()
	if err != nil {
		writeProblem(w, r, http.StatusServiceUnavailable, errHistoryUnavailable, err.Error(), nil)
		return
	}
	q, format, fields := jobQueryOf(r.URL.Query())
	if len(fields) > 0 {
		writeProblem(w, r, http.StatusBadRequest, "Invalid filter", fields[0].Field+" "+fields[0].Message, fields)
		return
	}
	records, err := s.listHistoryJobs(r.Context(), c.Client, store, q, r.URL.Query().Get("namespace"), format == "csv")
	switch {
	case errors.Is(err, history.ErrInvalid):
		writeProblem(w, r, http.StatusBadRequest, "Invalid filter", err.Error(), []FieldError{{Field: "before", Message: err.Error()}})
		return
	case errors.Is(err, errHistoryStore):
		writeProblem(w, r, http.StatusServiceUnavailable, errHistoryUnavailable, err.Error(), nil)
		return
	case err != nil:
		writeKubeError(w, r, err)
		return
	}
	if format == "csv" {
		writeHistoryCSV(w, records)
		return
	}
	out := HistoryJobList{Items: make([]HistoryJob, 0, len(records))}
	for _, rec := range records {
		out.Items = append(out.Items, historyJobOf(rec))
	}
	if len(records) > 0 && len(records) == pageLimit(q.Limit) {
		out.Next = records[len(records)-1].Cursor()
	}
	writeJSON(w, http.StatusOK, out)
}

// errHistoryStore marks an error of the history database, as opposed to one of Kubernetes.
var errHistoryStore = errors.New("history database")

// listHistoryJobs runs q over the namespaces the caller may read (namespace, when given, is the
// only one asked for): one page, or every page for an export.
func (s *Server) listHistoryJobs(ctx context.Context, c client.Client, store history.Store, q history.JobQuery, namespace string, every bool) (
	[]history.JobRecord, error) {
	namespaces, all, err := s.auditNamespaces(ctx, c, namespace)
	if err != nil || !all && len(namespaces) == 0 {
		return nil, err
	}
	q.Namespaces = namespaces
	if !every {
		records, err := store.Jobs(ctx, q)
		return records, storeError(err)
	}
	// An export pages through everything selected; a limit in q bounds it.
	left := q.Limit
	var records []history.JobRecord
	for {
		q.Limit = history.MaxLimit
		if left > 0 {
			q.Limit = min(history.MaxLimit, left-len(records))
		}
		page, err := store.Jobs(ctx, q)
		if err != nil {
			return nil, storeError(err)
		}
		records = append(records, page...)
		if len(page) < q.Limit || left > 0 && len(records) >= left {
			return records, nil
		}
		q.Before = page[len(page)-1].Cursor()
	}
}

// storeError marks err as the history database's, keeping what it wraps.
func storeError(err error) error {
	if err == nil || errors.Is(err, history.ErrInvalid) {
		return err
	}
	return errors.Join(errHistoryStore, err)
}

// pageLimit is the number of records a query with limit n returns at most.
func pageLimit(n int) int {
	if n <= 0 {
		return history.DefaultLimit
	}
	return min(n, history.MaxLimit)
}

// jobQueryOf reads the filters of a job record listing.
func jobQueryOf(v url.Values) (history.JobQuery, string, []FieldError) {
	q := history.JobQuery{Pool: v.Get("pool"), Repository: v.Get("repository"), Outcome: history.Outcome(v.Get("outcome"))}
	var errs []FieldError
	switch q.Outcome {
	case "", history.OutcomeSucceeded, history.OutcomeFailed, history.OutcomeCancelled, history.OutcomeUnknown:
	default:
		errs = append(errs, FieldError{Field: "outcome", Message: "must be succeeded, failed, cancelled or unknown"})
	}
	errs = append(errs, timeFilters(v, &q.From, &q.To)...)
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > history.MaxLimit {
			errs = append(errs, FieldError{Field: "limit", Message: "must be a whole number from 1 to " + strconv.Itoa(history.MaxLimit)})
		}
		q.Limit = n
	}
	if q.Before = v.Get("before"); q.Before != "" && !validCursor(q.Before) {
		errs = append(errs, FieldError{Field: "before", Message: "must be the next of the previous page"})
	}
	format := v.Get("format")
	if format != "" && format != "json" && format != "csv" {
		errs = append(errs, FieldError{Field: "format", Message: "must be json or csv"})
	}
	return q, format, errs
}

// timeFilters reads from and to as RFC 3339 times.
func timeFilters(v url.Values, from, to *time.Time) []FieldError {
	var errs []FieldError
	for _, t := range []struct {
		field string
		into  *time.Time
	}{{"from", from}, {"to", to}} {
		if raw := v.Get(t.field); raw != "" {
			at, err := time.Parse(time.RFC3339, raw)
			if err != nil {
				errs = append(errs, FieldError{Field: t.field, Message: "must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z"})
			}
			*t.into = at
		}
	}
	return errs
}

// validCursor tells a JobRecord.Cursor from anything else, so a bad before= is the caller's 400
// and not a database error.
func validCursor(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return false
	}
	micros, _, ok := strings.Cut(string(b), ":")
	_, err = strconv.ParseInt(micros, 10, 64)
	return ok && err == nil
}

// historyCSVHeader names the columns of the CSV export.
var historyCSVHeader = []string{"id", "namespace", "pool", "platform", "jobID", "repository", "runner", "provider",
	"hypervisorCluster", "host", "vmid", "template", "spiffeID", "queued", "vmRequested", "cloned", "booted", "attested",
	"jobStarted", "jobFinished", "vmDestroyed", "outcome", "failureReason", "sealed"}

func writeHistoryCSV(w http.ResponseWriter, records []history.JobRecord) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="hyperfleet-jobs.csv"`)
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write(historyCSVHeader)
	for _, r := range records {
		row := []string{csvCell(r.ID), csvCell(r.Namespace), csvCell(r.Pool), csvCell(r.Platform), csvCell(r.JobID),
			csvCell(r.Repository), csvCell(r.Runner), csvCell(r.VM.Provider), csvCell(r.VM.HypervisorCluster), csvCell(r.VM.Host),
			csvCell(r.VM.VMID), csvCell(r.Template.Name), csvCell(r.Identity.SPIFFEID)}
		for _, step := range timelineOf(r.Times) {
			cell := ""
			if step.Time != nil {
				cell = step.Time.UTC().Format(time.RFC3339Nano)
			}
			row = append(row, cell)
		}
		row = append(row, string(r.Outcome), csvCell(r.FailureReason), strconv.FormatBool(r.Sealed()))
		_ = cw.Write(row)
	}
	cw.Flush()
}
