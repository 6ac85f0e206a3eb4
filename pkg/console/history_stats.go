package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// HistoryStats summarises the jobs of each pool queued in [From, To).
type HistoryStats struct {
	From  time.Time          `json:"from"`
	To    time.Time          `json:"to"`
	Items []PoolHistoryStats `json:"items"`
}

// PoolHistoryStats summarises one pool's jobs.
type PoolHistoryStats struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	// Count is the number of jobs, finished or not.
	Count int64 `json:"count"`
	// Pickup is how long jobs waited for a runner (queued to job started), Duration how long they
	// ran (job started to job finished), each over the jobs that have both times.
	Pickup   DurationPercentiles `json:"pickup"`
	Duration DurationPercentiles `json:"duration"`
	// Outcomes counts the jobs by outcome; jobs without one yet are not counted.
	Outcomes map[history.Outcome]int64 `json:"outcomes"`
}

// DurationPercentiles are percentiles of a duration by nearest rank, in seconds.
type DurationPercentiles struct {
	Samples    int64   `json:"samples"`
	P50Seconds float64 `json:"p50Seconds"`
	P90Seconds float64 `json:"p90Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
}

// statsWindows are the windows a summary may be asked for by name.
var statsWindows = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// maxStatsSpan bounds from/to: every job of the span is read to rank its times.
const maxStatsSpan = 93 * 24 * time.Hour

// statsQueryOf reads a summary's window (24h by default), or its from and to, and its pool and
// namespace.
func statsQueryOf(v url.Values, now time.Time) (history.StatsQuery, []FieldError) {
	q := history.StatsQuery{Pool: v.Get("pool")}
	errs := timeFilters(v, &q.From, &q.To)
	window := v.Get("window")
	switch {
	case window != "" && (v.Get("from") != "" || v.Get("to") != ""):
		errs = append(errs, FieldError{Field: "window", Message: "give a window or from and to, not both"})
	case window != "" && statsWindows[window] == 0:
		errs = append(errs, FieldError{Field: "window", Message: "must be 24h, 7d or 30d"})
	}
	if len(errs) > 0 {
		return q, errs
	}
	if q.To.IsZero() {
		q.To = now
	}
	if q.From.IsZero() {
		span := statsWindows["24h"]
		if window != "" {
			span = statsWindows[window]
		}
		q.From = q.To.Add(-span)
	}
	switch {
	case !q.From.Before(q.To):
		errs = append(errs, FieldError{Field: "from", Message: "must be before to"})
	case q.To.Sub(q.From) > maxStatsSpan:
		errs = append(errs, FieldError{Field: "from", Message: "must be at most 93 days before to"})
	}
	return q, errs
}

// getHistoryStats summarises per pool the jobs of the namespaces the caller may read.
func (s *Server) getHistoryStats(w http.ResponseWriter, r *http.Request, c *caller) {
	store, err := s.audit.Store()
	if err != nil {
		writeProblem(w, r, http.StatusServiceUnavailable, errHistoryUnavailable, err.Error(), nil)
		return
	}
	q, fields := statsQueryOf(r.URL.Query(), time.Now())
	if len(fields) > 0 {
		writeProblem(w, r, http.StatusBadRequest, "Invalid filter", fields[0].Field+" "+fields[0].Message, fields)
		return
	}
	stats, err := s.historyStats(r.Context(), c.Client, store, q, r.URL.Query().Get("namespace"))
	if !writeJobError(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, stats)
}

// historyStats runs q over the namespaces the caller may read (namespace, when given, is the only
// one asked for).
func (s *Server) historyStats(ctx context.Context, c client.Client, store history.Store, q history.StatsQuery, namespace string) (HistoryStats, error) {
	out := HistoryStats{From: q.From.UTC(), To: q.To.UTC(), Items: []PoolHistoryStats{}}
	namespaces, all, err := s.auditNamespaces(ctx, c, namespace)
	if err != nil || !all && len(namespaces) == 0 {
		return out, err
	}
	q.Namespaces = namespaces
	pools, err := store.Percentiles(ctx, q)
	if err != nil {
		return out, storeError(err)
	}
	for _, p := range pools {
		out.Items = append(out.Items, PoolHistoryStats{Namespace: p.Namespace, Pool: p.Pool, Count: p.Count,
			Pickup: secondsOf(p.Pickup), Duration: secondsOf(p.Duration), Outcomes: p.Outcomes})
	}
	return out, nil
}

func secondsOf(p history.Percentiles) DurationPercentiles {
	return DurationPercentiles{Samples: p.Samples, P50Seconds: p.P50.Seconds(), P90Seconds: p.P90.Seconds(), P99Seconds: p.P99.Seconds()}
}
