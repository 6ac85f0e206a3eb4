package hostdrain

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/controllers/fresh"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// drainRecheck is how often a drain that is not done looks again without being woken: runners
// finish jobs and memory frees without an event it watches.
const drainRecheck = 30 * time.Second

// Reconciler empties the hosts a HypervisorCluster marks for maintenance: it moves their
// persistent VMs away through MachineMigrations it creates and owns, one at a time per host, by
// placement.PlanDrain (anti-affinity, host selectors and memory respected), trying a failed move
// again after a backoff that grows until the cluster's spec.drainPolicy gives up on the VM; it marks their
// runners' Machines so their RunnerPools retire the idle ones; and it reports each host's drain
// in status.hosts and the HostsDrained condition.
type Reconciler struct {
	Client      client.Client
	Recorder    record.EventRecorder
	Registry    *connection.Registry
	WatchFilter string
	// Clusters holds each HypervisorCluster's node listing, shared with its health check and
	// placement.
	Clusters *clusterruntime.Runtimes
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinemigrations,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch

// hostDrain is what one host's drain found.
type hostDrain struct {
	status  infrav1.HostStatus
	blocked []string
	// gaveUp are the VMs whose every migration attempt failed, each with why.
	gaveUp []string
	// retryAt is the earliest time a failed migration of the host is tried again.
	retryAt time.Time
	// retry is the cluster's spec.drainPolicy.
	retry placement.DrainRetry
}

// Reconcile advances the drain of every host in maintenance by at most one migration per host.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !hc.DeletionTimestamp.IsZero() || hc.Spec.InstallationID == "" {
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, hc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if annotations.HasPaused(hc) || (cluster != nil && annotations.IsPaused(cluster, hc)) {
		return ctrl.Result{}, nil
	}
	// status.hosts and HostsDrained are written in one patch: the patch helper writes conditions
	// and the rest of the status apart, and a reader in between saw a drain blocked by failed
	// migrations with no failure listed. The write carries the read's resourceVersion, since a
	// merge patch replaces the whole conditions list; on a conflict the drain runs again from a
	// fresh read.
	base := hc.DeepCopy()
	defer func() {
		stale, err := fresh.PatchStatus(ctx, r.Client, hc, base)
		switch {
		case err != nil:
			reterr = kerrors.NewAggregate([]error{reterr, err})
		case stale && reterr == nil:
			res = ctrl.Result{RequeueAfter: time.Millisecond}
		}
	}()
	return r.reconcileDrain(ctx, hc)
}

func (r *Reconciler) reconcileDrain(ctx context.Context, hc *infrav1.HypervisorCluster) (ctrl.Result, error) {
	if len(hc.Spec.HostsInMaintenance()) == 0 && len(hc.Status.Hosts) == 0 {
		// Nothing in maintenance, and the last pass left no drain behind (it clears runners'
		// marks and lists hosts whose migrations still run): no need to look at every claim on
		// each claim's change.
		r.reportDrains(hc, nil, nil)
		return ctrl.Result{}, nil
	}
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, hc.Namespace, hc.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	migrations := &fleetv1.MachineMigrationList{}
	if err := r.Client.List(ctx, migrations, client.InNamespace(hc.Namespace), client.MatchingLabels{fleetv1.DrainHypervisorClusterLabel: hc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	if err := r.reconcileRunners(ctx, hc, claims); err != nil {
		errs = append(errs, fmt.Errorf("marking runners on hosts in maintenance: %w", err))
	}
	maintenance := hc.Spec.HostsInMaintenance()
	hosts := slices.Clone(maintenance)
	for _, m := range migrations.Items {
		if h := m.Labels[fleetv1.DrainHostLabel]; migrationPending(&m) && !slices.Contains(hosts, h) {
			hosts = append(hosts, h) // maintenance was lifted while its migration still runs
		}
	}
	sort.Strings(hosts)
	if err := r.forgetDrains(ctx, hosts, migrations.Items); err != nil {
		errs = append(errs, err)
	}
	var drains []hostDrain
	for _, host := range hosts {
		d, err := r.drainHost(ctx, hc, host, slices.Contains(maintenance, host), claims, migrations.Items)
		if err != nil {
			errs = append(errs, fmt.Errorf("draining host %s: %w", host, err))
		}
		drains = append(drains, d)
	}
	if len(errs) == 0 || len(maintenance) > 0 {
		// After maintenance is lifted the hosts stay listed until a pass has cleared every mark.
		r.reportDrains(hc, maintenance, drains)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs)
	}
	if len(maintenance) > 0 && !conditions.IsTrue(hc, infrav1.HypervisorClusterHostsDrainedCondition) {
		return ctrl.Result{RequeueAfter: nextDrainPass(drains, time.Now())}, nil
	}
	return ctrl.Result{}, nil
}

// migrationPending is true until a migration has succeeded or failed.
func migrationPending(m *fleetv1.MachineMigration) bool {
	return m.DeletionTimestamp.IsZero() && m.Status.Phase != fleetv1.MachineMigrationPhaseSucceeded && m.Status.Phase != fleetv1.MachineMigrationPhaseFailed
}

// drainHost counts what is left on host and, while it is in maintenance and none of its drain's
// migrations is pending, creates the next one PlanDrain gives.
func (r *Reconciler) drainHost(ctx context.Context, hc *infrav1.HypervisorCluster, host string, inMaintenance bool,
	claims []infrav1.MachineClaim, migrations []fleetv1.MachineMigration) (hostDrain, error) {
	d := hostDrain{status: infrav1.HostStatus{Name: host, Maintenance: inMaintenance}, retry: drainRetryOf(hc)}
	// The last attempt of each VM's drain migrations off this host.
	last := map[string]*fleetv1.MachineMigration{}
	for i := range migrations {
		m := &migrations[i]
		if m.Labels[fleetv1.DrainHostLabel] != host {
			continue
		}
		if migrationPending(m) {
			d.status.PendingMigrations++
		}
		if prev := last[m.Spec.MachineClaimName]; m.DeletionTimestamp.IsZero() && (prev == nil || drainAttempt(m) > drainAttempt(prev)) {
			last[m.Spec.MachineClaimName] = m
		}
	}
	now := time.Now()
	// The VMs that may move now, with the attempt their move would be; the others on the host
	// stay out of the plan.
	var movable []infrav1.MachineClaim
	attempts := map[string]int{}
	for i := range claims {
		c := &claims[i]
		if c.Status.Node != host || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if !c.Spec.IsPersistent() {
			d.status.Runners++
			continue
		}
		d.status.PersistentVMs++
		m := last[c.Name]
		switch {
		case c.Spec.Migration().Strategy == infrav1.MigrationStrategyNone:
			d.blocked = append(d.blocked, fmt.Sprintf("%s: migrationPolicy.strategy is None", c.Name))
		case m != nil && m.Status.Phase == fleetv1.MachineMigrationPhaseFailed:
			if r.retryFailed(&d, c, m, now) {
				movable, attempts[c.Name] = append(movable, *c), drainAttempt(m)+1
			}
		case m != nil && m.Status.Phase == fleetv1.MachineMigrationPhaseSucceeded && m.Status.EndTime != nil && now.Sub(m.Status.EndTime.Time) < time.Minute:
			// Just moved off the host: the cache has not shown the claim on its new host yet.
		case c.Status.CompletedStep != infrav1.StepStarted || c.Annotations[infrav1.MigrationInProgressAnnotation] != "":
			// Still being created, or already moving: looked at again once that is over.
		default:
			movable, attempts[c.Name] = append(movable, *c), 1
		}
	}
	d.status.Drained = inMaintenance && d.status.PersistentVMs == 0 && d.status.Runners == 0
	d.status.BlockedBy = append(slices.Clone(d.gaveUp), d.blocked...)
	if !inMaintenance || d.status.PendingMigrations > 0 || len(movable) == 0 ||
		!conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		return d, nil
	}
	move, stuck, err := r.planNextMove(ctx, hc, host, claims, movable)
	if err != nil {
		return d, err
	}
	for _, name := range slices.Sorted(maps.Keys(stuck)) {
		d.blocked = append(d.blocked, fmt.Sprintf("%s: %v", name, stuck[name]))
	}
	d.status.BlockedBy = append(slices.Clone(d.gaveUp), d.blocked...)
	if move == nil {
		return d, nil
	}
	claim := &claims[slices.IndexFunc(claims, func(c infrav1.MachineClaim) bool { return c.Name == move.VM })]
	if err := r.createMigration(ctx, hc, host, claim, move.To, attempts[claim.Name], migrations); err != nil {
		return d, err
	}
	d.status.PendingMigrations++
	return d, nil
}

// planNextMove runs PlanDrain over the hosts as the hypervisor lists them now (with the memory of
// VMs being created there) and the persistent VMs where the claims say they are, and returns its first move (the biggest VM that fits
// somewhere) with the VMs that fit nowhere.
func (r *Reconciler) planNextMove(ctx context.Context, hc *infrav1.HypervisorCluster, host string,
	claims, movable []infrav1.MachineClaim) (*placement.Move, map[string]error, error) {
	provider, err := r.Registry.Get(ctx, hc)
	if err != nil {
		return nil, nil, err
	}
	// A fresh listing, once per move: the shared one may not show the VM the last move placed.
	// It is shared with placement in turn.
	listedAt := time.Now()
	nodes, err := provider.Nodes(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing hosts: %w", err)
	}
	r.Clusters.For(hc).PutNodes(provider, nodes, listedAt)
	hosts := claimplacement.Hosts(hc, nodes, claimplacement.ReservedSince(claims, "", listedAt))
	var vms []placement.PlacedVM
	policies := map[string]placement.Policy{}
	for _, vm := range claimplacement.PlacedVMs(claims) {
		if vm.Host == host && !slices.ContainsFunc(movable, func(c infrav1.MachineClaim) bool { return c.Name == vm.Name }) {
			continue // stays on the host in maintenance, which is no target: nothing to weigh
		}
		vms = append(vms, vm)
	}
	stuck := map[string]error{}
	for i := range movable {
		c := &movable[i]
		p, err := claimplacement.Policy(c, claimplacement.MemoryMiB(c))
		if err != nil {
			stuck[c.Name] = err
			vms = slices.DeleteFunc(vms, func(vm placement.PlacedVM) bool { return vm.Name == c.Name })
			continue
		}
		// A VM with passed-through devices goes only where each of its mappings has a device.
		if p.HostReasons, err = claimplacement.PCIReasons(ctx, nil, provider, c, nodes); err != nil {
			return nil, nil, fmt.Errorf("listing PCI resource mappings: %w", err)
		}
		policies[c.Name] = p
	}
	moves, unplaced := placement.PlanDrain(hosts, vms, host, policies)
	for name, err := range unplaced {
		stuck[name] = err
	}
	if len(moves) == 0 {
		return nil, stuck, nil
	}
	return &moves[0], stuck, nil
}

// reconcileRunners marks the Machines of RunnerPool runners on hosts in maintenance with
// HostMaintenanceAnnotation, which makes their pool retire them once they run no job, and takes
// the mark off when the host leaves maintenance.
func (r *Reconciler) reconcileRunners(ctx context.Context, hc *infrav1.HypervisorCluster, claims []infrav1.MachineClaim) error {
	maintenance := hc.Spec.HostsInMaintenance()
	var errs []error
	for i := range claims {
		c := &claims[i]
		if c.Spec.IsPersistent() || c.Status.Node == "" || !c.DeletionTimestamp.IsZero() {
			continue
		}
		machine, err := util.GetOwnerMachine(ctx, r.Client, c.ObjectMeta)
		if err != nil || machine == nil || machine.Labels[fleetv1.RunnerPoolNameLabel] == "" || !machine.DeletionTimestamp.IsZero() {
			continue // a runner without a pool finishes its one job and is swept
		}
		want := slices.Contains(maintenance, c.Status.Node)
		if _, marked := machine.Annotations[infrav1.HostMaintenanceAnnotation]; marked == want {
			continue
		}
		p := client.MergeFrom(machine.DeepCopy())
		if want {
			if machine.Annotations == nil {
				machine.Annotations = map[string]string{}
			}
			machine.Annotations[infrav1.HostMaintenanceAnnotation] = c.Status.Node
		} else {
			delete(machine.Annotations, infrav1.HostMaintenanceAnnotation)
		}
		if err := r.Client.Patch(ctx, machine, p); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// reportDrains writes status.hosts and the HostsDrained condition, with a Warning Event when the
// reason a drain is blocked changes.
func (r *Reconciler) reportDrains(hc *infrav1.HypervisorCluster, maintenance []string, drains []hostDrain) {
	hc.Status.Hosts = nil
	var blocked, gaveUp, left []string
	for _, d := range drains {
		hc.Status.Hosts = append(hc.Status.Hosts, d.status)
		if !d.status.Maintenance {
			continue
		}
		for _, g := range d.gaveUp {
			gaveUp = append(gaveUp, d.status.Name+": "+g)
		}
		for _, b := range d.blocked {
			blocked = append(blocked, d.status.Name+": "+b)
		}
		if !d.status.Drained {
			msg := fmt.Sprintf("%s: %d persistent VM(s), %d runner(s), %d migration(s) under way",
				d.status.Name, d.status.PersistentVMs, d.status.Runners, d.status.PendingMigrations)
			for _, f := range d.status.FailedMigrations {
				if f.NextAttemptTime != nil {
					msg += fmt.Sprintf("; %s: migration attempt %d failed (%s), next attempt at %s",
						f.MachineClaim, f.Attempts, f.LastFailure, f.NextAttemptTime.UTC().Format(time.RFC3339))
				}
			}
			left = append(left, msg)
		}
	}
	cond := metav1.Condition{Type: infrav1.HypervisorClusterHostsDrainedCondition, Status: metav1.ConditionTrue, ObservedGeneration: hc.Generation}
	switch {
	case len(maintenance) == 0:
		cond.Reason, cond.Message = infrav1.NoMaintenanceReason, "no host is in maintenance"
	case len(gaveUp) > 0:
		// The VMs no attempt could move come first; anything else that blocks follows.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, infrav1.DrainMigrationFailedReason, condition.Truncate(strings.Join(append(gaveUp, blocked...), "; "), 4096)
		if prev := conditions.Get(hc, cond.Type); prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message {
			r.Recorder.Event(hc, corev1.EventTypeWarning, infrav1.DrainMigrationFailedReason, cond.Message)
		}
	case len(blocked) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, infrav1.DrainBlockedReason, condition.Truncate(strings.Join(blocked, "; "), 4096)
		if prev := conditions.Get(hc, cond.Type); prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message {
			r.Recorder.Event(hc, corev1.EventTypeWarning, infrav1.DrainBlockedReason, cond.Message)
		}
	case len(left) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, infrav1.DrainingReason, strings.Join(left, "; ")
	default:
		cond.Reason, cond.Message = infrav1.HostsDrainedReason, "hosts in maintenance are empty: "+strings.Join(maintenance, ", ")
		if prev := conditions.Get(hc, cond.Type); prev == nil || prev.Reason != cond.Reason {
			r.Recorder.Event(hc, corev1.EventTypeNormal, infrav1.HostsDrainedReason, cond.Message)
		}
	}
	conditions.Set(hc, cond)
}

// SetupWithManager registers the controller: it watches HypervisorClusters' specs, the
// MachineMigrations it owns, and the claims whose host, labels or existence change.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("hostdrain").
		For(&infrav1.HypervisorCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&fleetv1.MachineMigration{}).
		Watches(&infrav1.MachineClaim{}, handler.EnqueueRequestsFromMapFunc(claimToHypervisorCluster), builder.WithPredicates(claimHostChanged())).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilter)).
		Complete(tracing.Reconciler("hostdrain", r))
}

func claimToHypervisorCluster(_ context.Context, o client.Object) []ctrl.Request {
	hc := o.GetLabels()[infrav1.HypervisorClusterNameLabel]
	if hc == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: hc}}}
}

// claimHostChanged lets through claims that came, went, changed host, finished provisioning or
// had their labels changed: what a drain counts and plans with.
func claimHostChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*infrav1.MachineClaim)
			n, ok2 := e.ObjectNew.(*infrav1.MachineClaim)
			return ok1 && ok2 && (o.Status.Node != n.Status.Node || o.Status.CompletedStep != n.Status.CompletedStep ||
				!labels.Equals(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				o.Annotations[infrav1.MigrationInProgressAnnotation] != n.Annotations[infrav1.MigrationInProgressAnnotation])
		},
	}
}
