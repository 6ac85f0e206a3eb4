package runnerpool

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// repairMinAge keeps the repair loop from undoing a webhook that arrived a moment ago: a listing
// overrules a delivery only when it began at least this long after it.
const repairMinAge = 30 * time.Second

// rateLimitBackoff is how long a pool leaves its platform alone after a rate limit that did not
// say when it lifts.
const rateLimitBackoff = time.Minute

// retryAtPrefix starts the PlatformRateLimited message, for people; status.platformRetryTime is
// what the controller reads.
const retryAtPrefix = "RetryAt="

// reconcileRepair compares the ledger with the CI platform's API every repair interval: webhooks
// are not redelivered by every platform, so queued jobs whose webhook was lost are added, jobs
// that are no longer queued are dropped, and jobs a delivery called running or done that the
// platform lists as queued are queued again (demand.Store.Repair): the listing wins over any
// delivery, which whoever holds the receiver's secret can forge. A process's first repair of
// each pool runs at once, however recent status.lastRepairTime: deliveries sent while no manager
// received them (an upgrade, a crash, a lost lease) are not redelivered, and the jobs they
// would have moved on stay queued in the ledger, holding idle runners, until a repair drops them.
// It also deregisters offline runners of this pool
// that no Machine backs. While the platform rate-limits the pool (PlatformRateLimited) nothing is
// sent to it until the time it named: reconciles in between only size on the ledger.
func (r *Reconciler) reconcileRepair(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	if r.Platforms == nil {
		return ctrl.Result{}, nil
	}
	if at, limited := rateLimitedUntil(s.pool); limited && time.Now().Before(at) {
		s.recheckBy(time.Until(at))
		return ctrl.Result{}, nil
	}
	last := s.pool.Status.LastRepairTime
	if uid, ok := r.repaired.Load(client.ObjectKeyFromObject(s.pool)); ok && uid == s.pool.UID && last != nil && time.Since(last.Time) < r.repairInterval() {
		return ctrl.Result{}, nil
	}
	if wait := r.holds.remaining(s.pool.UID, time.Now()); wait > 0 {
		s.recheckBy(wait)
		return ctrl.Result{}, nil // a rate limit or paused repair a cached pool may not show yet
	}
	if resume := s.pool.Status.RepairResumeTime; resume != nil && time.Now().Before(resume.Time) {
		s.recheckBy(time.Until(resume.Time))
		return ctrl.Result{}, nil // sizing continues on webhook demand
	}
	log := ctrl.LoggerFrom(ctx)
	c, scope, err := r.Platforms.Platform(ctx, s.pool)
	if err != nil {
		r.setPlatformUnavailable(s, err)
		return ctrl.Result{}, nil // sizing continues on webhook demand
	}
	listedAt := time.Now() // a delivery the listing may predate is not overruled by it
	jobs, err := c.QueuedJobs(ctx, scope)
	if errors.Is(err, platform.ErrBudgetReserved) {
		r.holds.hold(s.pool.UID, pauseRepair(s, err))
		return ctrl.Result{}, nil
	}
	if err != nil {
		r.setPlatformUnavailable(s, err)
		return ctrl.Result{}, nil
	}
	// Route like the webhook receiver does, so a job several pools could serve counts in one only.
	pools := &fleetv1.RunnerPoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(s.pool.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	mine := demand.JobsForPool(pools.Items, s.pool, jobs)
	if r.Claims != nil {
		// A job a pool of another namespace (or the webhook, for another pool) saw first is theirs.
		installation, err := r.Platforms.Installation(ctx, s.pool)
		if err != nil {
			r.setPlatformUnavailable(s, err)
			return ctrl.Result{}, nil
		}
		if mine, err = r.Claims.Owned(ctx, installation, s.pool, mine); err != nil {
			return ctrl.Result{}, err
		}
		if _, err := r.Claims.Prune(ctx, s.pool, s.demand.Jobs); err != nil {
			log.Error(err, "pruning job claims")
		}
	}
	added, removed, err := r.Demand.Repair(demand.WithListedAt(ctx, listedAt), s.pool, mine, repairMinAge)
	if err != nil {
		return ctrl.Result{}, err
	}
	if added+removed > 0 {
		log.Info("repaired demand from the CI platform's API", "platform", c.Kind(), "added", added, "removed", removed)
		// Re-read so this reconcile sizes on the repaired ledger.
		if _, err := r.reconcileDemand(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.removeStaleRunners(ctx, s, c, scope); err != nil {
		log.Error(err, "removing stale runners")
	}
	conditions.Set(s.pool, metav1.Condition{Type: fleetv1.PlatformAvailableCondition, Status: metav1.ConditionTrue,
		Reason: fleetv1.PlatformAvailableReason})
	conditions.Set(s.pool, metav1.Condition{Type: fleetv1.PlatformRateLimitedCondition, Status: metav1.ConditionFalse,
		Reason: fleetv1.NotRateLimitedReason})
	s.pool.Status.PlatformRetryTime = nil
	s.pool.Status.RepairResumeTime = nil
	s.pool.Status.LastRepairTime = &metav1.Time{Time: time.Now()}
	r.repaired.Store(client.ObjectKeyFromObject(s.pool), s.pool.UID)
	return ctrl.Result{}, nil
}

// pauseRepair stops the repair until the platform renews its rate-limit budget, whose rest is
// kept for runner registrations and deregistrations: those go on, and so does sizing on webhooks.
func pauseRepair(s *poolScope, err error) time.Time {
	at, ok := platform.RetryAt(err)
	if !ok || at.Before(time.Now()) {
		at = time.Now().Add(rateLimitBackoff)
	}
	at = at.UTC().Truncate(time.Second).Add(time.Second)
	s.pool.Status.RepairResumeTime = &metav1.Time{Time: at}
	conditions.Set(s.pool, metav1.Condition{Type: fleetv1.PlatformRateLimitedCondition, Status: metav1.ConditionFalse,
		Reason: fleetv1.BudgetReservedReason, Message: "repair paused until " + at.Format(time.RFC3339) + ": " + err.Error()})
	s.recheckBy(time.Until(at))
	return at
}

// removeStaleRunners deregisters offline runners this pool registered (they carry its
// platform.PoolRunnerLabel) that no Machine backs any more (a VM that died before deregistering).
// Names are no identity: pool "linux" must never remove a runner of pool "linux-gpu".
func (r *Reconciler) removeStaleRunners(ctx context.Context, s *poolScope, c platform.Platform, scope platform.Scope) error {
	runners, err := c.ListRunners(ctx, scope)
	if err != nil {
		return err
	}
	mark := platform.PoolRunnerLabel(string(s.pool.UID))
	var errs []error
	for _, rn := range runners {
		if rn.Status != platform.RunnerOffline || rn.Busy || !platform.HasLabel(rn.Labels, mark) {
			continue
		}
		if _, backed := s.machines[rn.Name]; backed {
			continue
		}
		if err := c.RemoveRunner(ctx, scope, rn.ID); err != nil && !errors.Is(err, platform.ErrRunnerBusy) {
			errs = append(errs, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("deregistered stale runner", "runner", rn.Name)
	}
	return errors.Join(errs...)
}

func (r *Reconciler) setPlatformUnavailable(s *poolScope, err error) {
	if errors.Is(err, platform.ErrRateLimited) {
		r.holds.hold(s.pool.UID, setRateLimited(s, err))
		return
	}
	reason := fleetv1.PlatformUnavailableReason
	switch {
	case errors.Is(err, platform.ErrUnsupported):
		reason = fleetv1.UnsupportedPlatformReason
	case errors.Is(err, tenancy.ErrNamespaceNotEnabled):
		reason = fleetv1.NamespaceNotEnabledReason
	case errors.Is(err, platform.ErrCredentials):
		reason = fleetv1.CredentialsNotFoundReason
	case errors.Is(err, platform.ErrInsecureURL):
		reason = fleetv1.InsecureURLRefusedReason
	case errors.Is(err, platform.ErrCABundle):
		reason = fleetv1.CABundleInvalidReason
	case errors.Is(err, platform.ErrTLS):
		reason = fleetv1.TLSErrorReason
	}
	conditions.Set(s.pool, metav1.Condition{Type: fleetv1.PlatformAvailableCondition, Status: metav1.ConditionFalse,
		Reason: reason, Message: err.Error()})
}

// setRateLimited records a rate limit: PlatformRateLimited True until the time the platform named
// (or rateLimitBackoff from now), which is also when the pool next calls it. The time is kept in
// status.platformRetryTime, so every replica and a restarted manager honour it too.
func setRateLimited(s *poolScope, err error) time.Time {
	at, ok := platform.RetryAt(err)
	if !ok || at.Before(time.Now()) {
		at = time.Now().Add(rateLimitBackoff)
	}
	at = at.UTC().Truncate(time.Second).Add(time.Second)
	conditions.Set(s.pool, metav1.Condition{Type: fleetv1.PlatformRateLimitedCondition, Status: metav1.ConditionTrue,
		Reason: fleetv1.RateLimitedReason, Message: retryAtPrefix + at.Format(time.RFC3339) + ": " + err.Error()})
	s.pool.Status.PlatformRetryTime = &metav1.Time{Time: at}
	s.recheckBy(time.Until(at))
	return at
}

// platformHolds remembers, per pool, until when its repair must not call the platform (a rate
// limit, a repair paused for the budget). The pool's status says so for every replica and a
// restarted manager, but a reconcile working from a cached pool that predates that status write
// would call again at once.
type platformHolds struct {
	mu  sync.Mutex
	end map[types.UID]time.Time
}

func (h *platformHolds) hold(uid types.UID, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end == nil {
		h.end = map[types.UID]time.Time{}
	}
	for k, t := range h.end { // pools deleted since do not linger
		if time.Since(t) > time.Hour {
			delete(h.end, k)
		}
	}
	h.end[uid] = until
}

func (h *platformHolds) until(uid types.UID) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end[uid]
}

// remaining is how long the pool's hold lasts from now; 0 when there is none.
func (h *platformHolds) remaining(uid types.UID, now time.Time) time.Duration {
	if d := h.until(uid).Sub(now); d > 0 {
		return d
	}
	return 0
}

// rateLimitedUntil returns when the pool's rate limit lifts, if the platform rate-limits it.
func rateLimitedUntil(p *fleetv1.RunnerPool) (time.Time, bool) {
	if p.Status.PlatformRetryTime == nil || !conditions.IsTrue(p, fleetv1.PlatformRateLimitedCondition) {
		return time.Time{}, false
	}
	return p.Status.PlatformRetryTime.Time, true
}
