package runnerpool

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// PolledDemand records the polls of a platform's API (platform.Pollers) in the ledgers of the
// pools they serve, the way the repair loop records its reads: each job is routed to one pool
// (demand.JobsForPool), claimed for it, and the ledger applies only what is new, so a job seen by
// a webhook and by a poll is one entry, and a job a poll no longer lists as queued stops being
// demand. A poll the platform refused sets the pools' PlatformRateLimited condition until the
// time it named, which the repair loop honours too.
type PolledDemand struct {
	Client client.Client
	Demand *demand.Store
	// Claims, when set, keeps a job in the one pool (of any namespace) that saw it first.
	Claims *demand.Claims
	// Notify wakes a pool whose demand changed; may be nil.
	Notify func(types.NamespacedName)
}

// Feed implements platform.DemandFeed.
func (f *PolledDemand) Feed(ctx context.Context, d platform.PolledDemand) {
	log := ctrl.LoggerFrom(ctx).WithValues("platform", d.Kind, "installation", d.Installation)
	if d.Err != nil {
		if errors.Is(d.Err, platform.ErrRateLimited) {
			metrics.PlatformRateLimit(string(d.Kind))
			for _, key := range d.Pools {
				if err := f.setRateLimited(ctx, key, d.Next, d.Err); err != nil {
					log.Error(err, "recording a rate limit", "pool", key)
				}
			}
		}
		log.Info("polling the CI platform failed", "error", d.Err.Error(), "next", d.Next)
		return
	}
	minAge := time.Duration(0)
	if d.HeldToo {
		minAge = repairMinAge // a webhook may have announced a job this poll predates
	}
	for _, key := range d.Pools {
		added, removed, err := f.feedPool(ctx, d, key, minAge)
		if err != nil {
			log.Error(err, "recording polled demand", "pool", key)
			continue
		}
		if added+removed > 0 {
			log.V(1).Info("recorded polled demand", "pool", key, "added", added, "removed", removed)
			if f.Notify != nil {
				f.Notify(key)
			}
		}
	}
}

func (f *PolledDemand) feedPool(ctx context.Context, d platform.PolledDemand, key types.NamespacedName, minAge time.Duration) (int, int, error) {
	pool := &fleetv1.RunnerPool{}
	if err := f.Client.Get(ctx, key, pool); err != nil {
		return 0, 0, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return 0, 0, nil
	}
	pools := &fleetv1.RunnerPoolList{}
	if err := f.Client.List(ctx, pools, client.InNamespace(pool.Namespace)); err != nil {
		return 0, 0, err
	}
	mine := demand.JobsForPool(pools.Items, pool, d.Jobs)
	if f.Claims != nil {
		var err error
		if mine, err = f.Claims.Owned(ctx, d.Installation, pool, mine); err != nil {
			return 0, 0, err
		}
	}
	if err := f.clearRateLimited(ctx, pool); err != nil {
		return 0, 0, err
	}
	// Jobs in progress tell which runners are busy, which webhooks would have said: recorded
	// first (forward only), so the repair below does not take them for vanished queued jobs.
	started := 0
	for _, j := range mine {
		if j.State != platform.JobInProgress {
			continue
		}
		changed, err := f.Demand.Record(ctx, pool, platform.JobEvent{JobID: j.ID, RunID: j.RunID, State: platform.JobInProgress,
			Labels: j.Labels, Repository: j.Repository, Installation: d.Installation, RunnerName: j.RunnerName, Name: j.Name})
		if err != nil {
			return 0, 0, err
		}
		if changed {
			started++
		}
	}
	added, removed, err := f.Demand.Repair(ctx, pool, mine, minAge)
	return added, removed + started, err
}

// setRateLimited sets PlatformRateLimited True until at, in the format the repair loop reads.
func (f *PolledDemand) setRateLimited(ctx context.Context, key types.NamespacedName, at time.Time, cause error) error {
	pool := &fleetv1.RunnerPool{}
	if err := f.Client.Get(ctx, key, pool); err != nil {
		return client.IgnoreNotFound(err)
	}
	if at.IsZero() || at.Before(time.Now()) {
		at = time.Now().Add(rateLimitBackoff)
	}
	at = at.UTC().Truncate(time.Second).Add(time.Second)
	base := pool.DeepCopy()
	conditions.Set(pool, metav1.Condition{Type: fleetv1.PlatformRateLimitedCondition, Status: metav1.ConditionTrue,
		Reason: fleetv1.RateLimitedReason, Message: retryAtPrefix + at.Format(time.RFC3339) + ": " + cause.Error()})
	return f.Client.Status().Patch(ctx, pool, client.MergeFrom(base))
}

// clearRateLimited sets PlatformRateLimited False after a poll went through.
func (f *PolledDemand) clearRateLimited(ctx context.Context, pool *fleetv1.RunnerPool) error {
	if !conditions.IsTrue(pool, fleetv1.PlatformRateLimitedCondition) {
		return nil
	}
	base := pool.DeepCopy()
	conditions.Set(pool, metav1.Condition{Type: fleetv1.PlatformRateLimitedCondition, Status: metav1.ConditionFalse,
		Reason: fleetv1.NotRateLimitedReason})
	return f.Client.Status().Patch(ctx, pool, client.MergeFrom(base))
}
