package history

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// statSample is what Percentiles reads of one job.
type statSample struct {
	namespace, pool           string
	queued, started, finished *time.Time
	outcome                   Outcome
}

// summarise groups samples by namespace and pool, in that order, and computes each group's counts
// and percentiles. It runs in Go rather than SQL so that both databases answer alike.
func summarise(samples []statSample) []PoolStats {
	type key struct{ namespace, pool string }
	type group struct {
		stats             PoolStats
		pickup, durations []time.Duration
	}
	groups := map[key]*group{}
	for _, s := range samples {
		k := key{s.namespace, s.pool}
		g := groups[k]
		if g == nil {
			g = &group{stats: PoolStats{Namespace: s.namespace, Pool: s.pool, Outcomes: map[Outcome]int64{}}}
			groups[k] = g
		}
		g.stats.Count++
		if s.outcome != "" {
			g.stats.Outcomes[s.outcome]++
		}
		if s.queued != nil && s.started != nil {
			g.pickup = append(g.pickup, s.started.Sub(*s.queued))
		}
		if s.started != nil && s.finished != nil {
			g.durations = append(g.durations, s.finished.Sub(*s.started))
		}
	}
	out := make([]PoolStats, 0, len(groups))
	for _, g := range groups {
		g.stats.Pickup = percentiles(g.pickup)
		g.stats.Duration = percentiles(g.durations)
		out = append(out, g.stats)
	}
	slices.SortFunc(out, func(a, b PoolStats) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pool, b.Pool))
	})
	return out
}

// percentiles by nearest rank: the p-th percentile is the smallest value at least p% of the values
// are less than or equal to, always one of the values themselves.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(p int) time.Duration {
		i := (p*len(ds)+99)/100 - 1 // ceil(p/100 * n) - 1
		return ds[max(i, 0)]
	}
	return Percentiles{Samples: int64(len(ds)), P50: rank(50), P90: rank(90), P99: rank(99)}
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
