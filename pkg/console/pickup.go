package console

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// PoolLatency is how long a pool's jobs wait for a runner, from its job ledger.
type PoolLatency struct {
	// OldestQueued is how long the longest-waiting queued job has waited; zero with none queued.
	OldestQueued time.Duration
	// PickupMedian is the median time from queued to taken by a runner, over the jobs running now
	// (the ledger keeps a job's pickup time only until it completes); zero without such jobs.
	PickupMedian time.Duration
	// Running counts the jobs PickupMedian is taken over.
	Running int
}

// poolLatency reads a pool's job ledger as the caller. A ledger the caller may not read, or that
// does not exist yet, gives no latency rather than an error: the pool itself is still shown.
func poolLatency(ctx context.Context, c client.Client, pool *fleetv1.RunnerPool, now time.Time) (PoolLatency, bool) {
	d, err := (&demand.Store{Client: c}).Snapshot(ctx, pool)
	if err != nil {
		return PoolLatency{}, false
	}
	return latencyOf(d.Jobs, now), true
}

// latencyOf computes PoolLatency from ledger records; it does not care how the ledger keys them.
func latencyOf[K comparable](jobs map[K]demand.Record, now time.Time) PoolLatency {
	var l PoolLatency
	var pickups []time.Duration
	for _, r := range jobs {
		switch r.State {
		case platform.JobQueued, platform.JobWaiting:
			since := r.FirstQueued
			if since.IsZero() {
				since = r.Transition
			}
			if w := now.Sub(since); w > l.OldestQueued {
				l.OldestQueued = w
			}
		case platform.JobInProgress:
			if !r.FirstQueued.IsZero() && !r.Transition.Before(r.FirstQueued) {
				pickups = append(pickups, r.Transition.Sub(r.FirstQueued))
			}
		}
	}
	if len(pickups) > 0 {
		slices.Sort(pickups)
		l.PickupMedian = pickups[len(pickups)/2]
		l.Running = len(pickups)
	}
	return l
}
