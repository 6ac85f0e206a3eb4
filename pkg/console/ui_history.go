package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// historyFilters are the filters of the History page, as the API reads them.
var historyFilters = []string{"namespace", "pool", "repository", "outcome", "from", "to"}

// historyPageData is what the History page shows.
type historyPageData struct {
	// Filter holds the filters as given, to fill the form again.
	Filter map[string]string
	Rows   []historyRow
	// Older continues the listing; CSV and JSON export the same filters; Stats summarises.
	Older, CSV, JSON, Stats string
}

// historyRow is one listed record with what the page shows of it.
type historyRow struct {
	HistoryJob
	Href, Queued, Ran string
}

// historyPage lists the job records as getHistoryJobs does, with the same filters.
func (s *Server) historyPage(w http.ResponseWriter, r *http.Request, c *caller) {
	v := r.URL.Query()
	d := historyPageData{Filter: map[string]string{}, Stats: "/history/stats"}
	filters := url.Values{}
	for _, k := range historyFilters {
		if d.Filter[k] = v.Get(k); d.Filter[k] != "" {
			filters.Set(k, d.Filter[k])
		}
	}
	d.JSON = "/api/v1/history/jobs?" + filters.Encode()
	csvQuery := url.Values{"format": {"csv"}}
	for k, vals := range filters {
		csvQuery[k] = vals
	}
	d.CSV = "/api/v1/history/jobs?" + csvQuery.Encode()
	statsQuery := url.Values{}
	for _, k := range []string{"namespace", "pool"} {
		if d.Filter[k] != "" {
			statsQuery.Set(k, d.Filter[k])
		}
	}
	if len(statsQuery) > 0 {
		d.Stats += "?" + statsQuery.Encode()
	}
	store, err := s.audit.Store()
	if err != nil {
		s.render(w, http.StatusServiceUnavailable, "error", c, errHistoryUnavailable, "history", err.Error())
		return
	}
	q, _, fields := jobQueryOf(v)
	if len(fields) > 0 {
		s.render(w, http.StatusBadRequest, "error", c, "Invalid filter", "history", fields[0].Field+" "+fields[0].Message)
		return
	}
	records, err := s.listHistoryJobs(r.Context(), c.Client, store, q, d.Filter["namespace"], false)
	if !s.renderJobError(w, c, err) {
		return
	}
	for _, rec := range records {
		row := historyRow{HistoryJob: historyJobOf(rec), Href: "/history/jobs/" + jobRecordPath(rec.ID)}
		if at := rec.Times.SortTime(); !at.IsZero() {
			row.Queued = at.UTC().Format("2006-01-02 15:04:05")
		}
		if t := rec.Times; t.JobStarted != nil && t.JobFinished != nil {
			row.Ran = preciseDuration(t.JobFinished.Sub(*t.JobStarted))
		}
		d.Rows = append(d.Rows, row)
	}
	if n := len(records); n > 0 && n == pageLimit(q.Limit) {
		if q.Limit > 0 {
			filters.Set("limit", v.Get("limit"))
		}
		filters.Set("before", records[n-1].Cursor())
		d.Older = "/history?" + filters.Encode()
	}
	s.render(w, http.StatusOK, "history", c, "Job history", "history", d)
}

// jobRecordPath is job id's platform and ID as the routes take them, each escaped.
func jobRecordPath(id string) string {
	platform, jobID, _ := strings.Cut(id, "/")
	return url.PathEscape(platform) + "/" + url.PathEscape(jobID)
}

// historyJobPageData is what a job record's page shows.
type historyJobPageData struct {
	Job   HistoryJobDetail
	Steps []timelineRow
	// Envelope downloads the signed envelope; empty for a record not sealed.
	Envelope string
	// Total is the time from the first known moment to the last.
	Total string
}

// timelineRow is one moment of the job's timeline as the page shows it.
type timelineRow struct {
	Step, Label, Time, Gap string
	Known                  bool
}

func (s *Server) historyJobPage(w http.ResponseWriter, r *http.Request, c *caller) {
	store, err := s.audit.Store()
	if err != nil {
		s.render(w, http.StatusServiceUnavailable, "error", c, errHistoryUnavailable, "history", err.Error())
		return
	}
	rec, err := s.visibleJob(r.Context(), c.Client, store, r.PathValue("platform")+"/"+r.PathValue("id"))
	if !s.renderJobError(w, c, err) {
		return
	}
	d := historyJobPageData{Job: s.historyJobDetail(r.Context(), rec)}
	if rec.Sealed() {
		d.Envelope = "/api/v1/history/jobs/" + jobRecordPath(rec.ID) + "?format=envelope"
	}
	var first, last *time.Time
	for i, step := range d.Job.Timeline {
		row := timelineRow{Step: step.Step, Label: timelineSteps[i].label, Known: step.Time != nil}
		if step.Time != nil {
			row.Time = step.Time.UTC().Format("2006-01-02 15:04:05.000")
			if first == nil {
				first = step.Time
			}
			last = step.Time
		}
		if step.SincePreviousSeconds != nil {
			row.Gap = preciseDuration(time.Duration(*step.SincePreviousSeconds * float64(time.Second)))
		}
		d.Steps = append(d.Steps, row)
	}
	if first != nil && last != first {
		d.Total = preciseDuration(last.Sub(*first))
	}
	s.render(w, http.StatusOK, "historyjob", c, "Job "+rec.ID, "history", d)
}

// historyStatsPageData is what the percentiles page shows.
type historyStatsPageData struct {
	Window, Namespace, Pool string
	Windows                 []string
	Stats                   HistoryStats
	Rows                    []statsRow
}

// statsRow is one pool's summary as the page shows it.
type statsRow struct {
	PoolHistoryStats
	// PickupText and DurationText are p50, p90 and p99 as the page writes them.
	PickupText, DurationText [3]string
	OutcomesText             string
}

func (s *Server) historyStatsPage(w http.ResponseWriter, r *http.Request, c *caller) {
	v := r.URL.Query()
	d := historyStatsPageData{Window: v.Get("window"), Namespace: v.Get("namespace"), Pool: v.Get("pool"), Windows: []string{"24h", "7d", "30d"}}
	if d.Window == "" && v.Get("from") == "" && v.Get("to") == "" {
		d.Window = "24h"
		v.Set("window", d.Window)
	}
	store, err := s.audit.Store()
	if err != nil {
		s.render(w, http.StatusServiceUnavailable, "error", c, errHistoryUnavailable, "history", err.Error())
		return
	}
	q, fields := statsQueryOf(v, time.Now())
	if len(fields) > 0 {
		s.render(w, http.StatusBadRequest, "error", c, "Invalid filter", "history", fields[0].Field+" "+fields[0].Message)
		return
	}
	if d.Stats, err = s.historyStats(r.Context(), c.Client, store, q, d.Namespace); !s.renderJobError(w, c, err) {
		return
	}
	for _, p := range d.Stats.Items {
		row := statsRow{PoolHistoryStats: p}
		for i, sec := range []float64{p.Pickup.P50Seconds, p.Pickup.P90Seconds, p.Pickup.P99Seconds} {
			row.PickupText[i] = secondsText(sec, p.Pickup.Samples)
		}
		for i, sec := range []float64{p.Duration.P50Seconds, p.Duration.P90Seconds, p.Duration.P99Seconds} {
			row.DurationText[i] = secondsText(sec, p.Duration.Samples)
		}
		var outcomes []string
		for _, o := range []history.Outcome{history.OutcomeSucceeded, history.OutcomeFailed, history.OutcomeCancelled, history.OutcomeUnknown} {
			if n := p.Outcomes[o]; n > 0 {
				outcomes = append(outcomes, fmt.Sprintf("%d %s", n, o))
			}
		}
		row.OutcomesText = strings.Join(outcomes, ", ")
		d.Rows = append(d.Rows, row)
	}
	s.render(w, http.StatusOK, "historystats", c, "Job percentiles", "history", d)
}

// renderJobError shows err of the job history's reads as a page, or reports there was none.
func (s *Server) renderJobError(w http.ResponseWriter, c *caller, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoJobRecord):
		s.render(w, http.StatusNotFound, "error", c, "No such job record", "history", err.Error())
	case errors.Is(err, errHistoryStore):
		s.render(w, http.StatusServiceUnavailable, "error", c, errHistoryUnavailable, "history", err.Error())
	default:
		s.renderKubeError(w, c, err)
	}
	return false
}

func secondsText(sec float64, samples int64) string {
	if samples == 0 {
		return "—"
	}
	return preciseDuration(time.Duration(sec * float64(time.Second)))
}

// preciseDuration writes a duration to the unit that matters at its size: 850ms, 12.4s, 3m 05s,
// 2h 07m, 3d 04h.
func preciseDuration(d time.Duration) string {
	if d < 0 {
		return "−" + preciseDuration(-d)
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
}
