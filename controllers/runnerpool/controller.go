package runnerpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/scaling"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler keeps a pool of one-job runners the size its jobs need, like a MachineSet:
// it compares the runners that exist with the desired count and creates or removes Machines (each
// with a MachineClaim and a BootstrapConfig from the pool's templates).
type Reconciler struct {
	Client client.Client
	// APIReader reads a runner's BootstrapConfig past the cache before the runner is removed; the
	// cached Client when nil.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// History, when set, tells the pools' HistoryRecorded condition whether job records reach the
	// manager's history store.
	History HistoryHealth
	Demand  *demand.Store
	// Claims gives each job one owning pool across namespaces (shared with the webhook receiver);
	// nil leaves the repair loop to rank the pool's own namespace only.
	Claims *demand.Claims
	// Platforms gives each pool its CI platform client, instrumented already (the manager wraps
	// it once); nil turns the repair loop and runner deregistration off.
	Platforms   platform.Source
	WatchFilter string
	// RepairInterval is how often demand is reconciled against the CI platform's API;
	// config.DefaultRepairInterval when not positive.
	RepairInterval time.Duration
	// RunnerName names a new runner of pool; nil appends a random suffix to the pool's name.
	RunnerName func(pool string) string
	// Wakeups receives pools whose demand changed (from the webhook receiver).
	Wakeups <-chan event.TypedGenericEvent[*fleetv1.RunnerPool]
	// deregistrations backs off a runner's deregistration after the platform failed it.
	deregistrations deregisterBackoff
	// holds remembers each pool's rate limit or paused repair until a cached pool shows it.
	holds platformHolds
	// repaired holds, by name, the UID of each pool this process has repaired (forgotten when the
	// pool is gone): the first repair of each
	// pool after a start runs at once, whenever the last one was (see reconcileRepair).
	repaired sync.Map
}

// poolScope is what one reconcile of a RunnerPool works with.
type poolScope struct {
	pool    *fleetv1.RunnerPool
	cluster *clusterv1.Cluster
	// machines are the pool's Machines, by name.
	machines map[string]*clusterv1.Machine
	runners  []scaling.Runner
	// recheck is when the next runner timeout falls due (zero: none).
	recheck time.Duration
	// platformRetry is when the platform's rate limit lifts (zero: not limited).
	platformRetry time.Duration
	demand        demand.Demand
	plan          scaling.Plan
	// warmReady counts the warm VMs ready to start: cloned, configured and stopped.
	warmReady int
	// targets are spec.template.targets with their runners and state (nil without targets).
	targets []placement.Target
	// waiting counts the runners waiting for capacity, per HypervisorCluster.
	waiting []fleetv1.CapacityWait
	// listed is the pool's objects as this reconcile read them (see listing).
	listed *poolListing
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=runnerpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=runnerpools/status;runnerpools/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaimtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch

// Reconcile sizes one RunnerPool.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	pool := &fleetv1.RunnerPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.repaired.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &poolScope{pool: pool}
	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}, cluster)
	switch {
	case err == nil:
		s.cluster = cluster
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, pool, fleetv1.RunnerPoolFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, s.cluster, pool); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(pool, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		r.updateStatus(s)
		if err := helper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{
			fleetv1.ReadyCondition, fleetv1.ScalingLimitedCondition, fleetv1.PlatformAvailableCondition, fleetv1.PlatformRateLimitedCondition, fleetv1.InsecureTransportCondition,
			clusterv1.PausedCondition,
		}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if !pool.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	if s.cluster == nil {
		conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.ClusterNotFoundReason, Message: fmt.Sprintf("Cluster %s not found", s.pool.Spec.ClusterName)})
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if !s.cluster.DeletionTimestamp.IsZero() {
		// Cluster API waits for the Cluster's worker Machines to go but leaves owned ones to their
		// owner, as it does for a MachineSet's: remove them all, and create none.
		conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.ClusterDeletingReason, Message: fmt.Sprintf("Cluster %s is being deleted; removing every runner", s.cluster.Name)})
		if _, err := r.deleteAllMachines(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if _, err := r.reconcileRunners(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	for _, step := range []func(context.Context, *poolScope) (ctrl.Result, error){
		r.reconcileTransport,
		r.reconcileRunners,
		r.reconcileWaitingForCapacity,
		r.reconcileOrphans,
		r.reconcileTargets,
		r.reconcileDemand,
		r.reconcileRepair,
		r.reconcileReplicas,
	} {
		if res, err := step(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	// Look again at the next repair, or when a runner's timeout falls due if that is sooner.
	next := r.repairInterval()
	if s.recheck > 0 && s.recheck < next {
		next = s.recheck
	}
	if s.platformRetry > 0 && s.platformRetry < next {
		next = s.platformRetry
	}
	if s.skipsTargets() && targetRecheck < next {
		next = targetRecheck
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileDemand reads the pool's job ledger.
func (r *Reconciler) reconcileDemand(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	d, err := r.Demand.Snapshot(ctx, s.pool)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading demand: %w", err)
	}
	s.demand = d
	done := map[string]bool{}
	for _, rec := range d.Jobs {
		if rec.State == platform.JobCompleted && rec.Runner != "" {
			done[rec.Runner] = true
		}
	}
	for i := range s.runners {
		if _, busy := d.Busy[s.runners[i].Name]; busy {
			s.runners[i].Busy = true
		} else if done[s.runners[i].Name] {
			// A one-job runner whose job completed: its VM is powering off.
			s.runners[i].Done = true
		}
	}
	return ctrl.Result{}, nil
}

// reconcileReplicas creates or removes runners to reach the desired count.
func (r *Reconciler) reconcileReplicas(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	busy := 0
	for _, rn := range s.runners {
		if rn.Busy && !rn.Deleting {
			busy++
		}
	}
	s.plan = scaling.Decide(policyOf(s.pool), scaling.Demand{Queued: s.demand.Queued, Busy: busy}, s.runners, time.Now())
	s.recheck = s.plan.Recheck
	var errs []error
	removed, kept := 0, 0
	for _, rm := range s.plan.Remove {
		ok, err := r.removeRunner(ctx, s, rm)
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case ok:
			removed++
		case rm.Reason != scaling.ReasonScaleDown && !rm.Held:
			// A runner to be replaced stays (the platform says it has a job, or it is being
			// registered): it keeps its place, so the pool does not grow beside it. Max already
			// counts it; the desired size now does too. A held runner's place is already planned.
			kept++
		}
	}
	started, err := r.startWarmRunners(ctx, s)
	if err != nil {
		errs = append(errs, err)
	}
	create := s.plan.CreateIfKept(kept)
	var created []string
	for i := 0; i < create+s.plan.CreateWarm; i++ {
		name, err := r.createRunner(ctx, s, i >= create)
		if errors.Is(err, placement.ErrNoTarget) {
			conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
				Reason: fleetv1.NoTargetAvailableReason, Message: err.Error()})
			break
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		created = append(created, name)
	}
	if len(created) > 0 || removed > 0 || started > 0 {
		// Wait until the cache shows what we did, so the next reconcile does not count stale
		// Machines and create or remove a second time.
		if err := r.waitForCache(ctx, s.pool, created); err != nil {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{}, kerrors.NewAggregate(errs)
}

func (r *Reconciler) reconcileDelete(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	left, err := r.deleteAllMachines(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if left > 0 {
		conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.PoolDeletingReason, Message: fmt.Sprintf("waiting for %d Machine(s) to be deleted", left)})
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if r.Claims != nil {
		if err := r.Claims.Release(ctx, s.pool); err != nil {
			return ctrl.Result{}, fmt.Errorf("releasing job claims: %w", err)
		}
	}
	controllerutil.RemoveFinalizer(s.pool, fleetv1.RunnerPoolFinalizer)
	metrics.DeletePool(s.pool.Namespace, s.pool.Name)
	return ctrl.Result{}, nil
}

// deleteAllMachines deletes every Machine of the pool and reports how many still exist.
func (r *Reconciler) deleteAllMachines(ctx context.Context, s *poolScope) (int, error) {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(s.pool.Namespace),
		client.MatchingLabels{fleetv1.RunnerPoolNameLabel: s.pool.Name}); err != nil {
		return 0, err
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
	}
	return len(machines.Items), nil
}

func (r *Reconciler) repairInterval() time.Duration {
	if r.RepairInterval > 0 {
		return r.RepairInterval
	}
	return config.DefaultRepairInterval
}

// SetupWithManager registers the controller: it owns Machines and follows BootstrapConfigs (a runner
// becomes ready when its VM attests) and wake-ups from the webhook receiver.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.RunnerPool{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilter)).
		Watches(&clusterv1.Machine{}, coalesced(poolChildDelay, controllingOwner(fleetv1.GroupVersion.WithKind("RunnerPool").GroupKind()))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPools)).
		Watches(&infrav1.HypervisorCluster{}, handler.EnqueueRequestsFromMapFunc(r.hypervisorClusterToPools)).
		Watches(&infrav1.MachineClaim{}, coalesced(poolChildDelay, poolOfLabelled)).
		Watches(&bootstrapv1.BootstrapConfig{}, coalesced(poolChildDelay, poolOfLabelled)).
		Watches(&corev1.ConfigMap{}, coalesced(poolChildDelay, poolOfLabelled))
	if r.Wakeups != nil {
		b = b.WatchesRawSource(source.Channel(r.Wakeups, &handler.TypedEnqueueRequestForObject[*fleetv1.RunnerPool]{}))
	}
	return b.Complete(tracing.Reconciler("runnerpool", r))
}

// clusterToPools wakes a Cluster's pools, e.g. to remove their runners when it is deleted.
func (r *Reconciler) clusterToPools(ctx context.Context, o client.Object) []ctrl.Request {
	pools := &fleetv1.RunnerPoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for _, p := range pools.Items {
		if targetsOfCluster(&p, o.GetName()) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return reqs
}

// poolOfLabelled maps an object carrying the pool label to its pool.
func poolOfLabelled(_ context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[fleetv1.RunnerPoolNameLabel]
	if name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// recheckBy asks for a reconcile within d, when a platform's rate limit lifts.
func (s *poolScope) recheckBy(d time.Duration) {
	if d < time.Second {
		d = time.Second
	}
	s.platformRetry = d
}
