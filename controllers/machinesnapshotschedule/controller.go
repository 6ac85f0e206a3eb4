package machinesnapshotschedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/snapshotschedule"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler takes a claim's MachineSnapshots when its cron schedule is due
// and deletes those its retention policy no longer keeps (their finalizers remove the hypervisor
// snapshots).
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Clock tells the time; tests pass a fake one. Default the real clock.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshotschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshotschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshots,verbs=create;delete

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Reconcile prunes a schedule's snapshots and takes the one that is due.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	sched := &fleetv1.MachineSnapshotSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, sched); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sched.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its snapshots stay; delete them by label if they should go
	}
	helper, err := patch.NewHelper(sched, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, sched, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	setReady := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(sched, metav1.Condition{Type: fleetv1.ReadyCondition, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: sched.Generation})
	}
	cron, err := snapshotschedule.Parse(sched.Spec.Schedule, sched.Spec.TimeZone)
	if err != nil {
		sched.Status.NextRunTime = nil
		setReady(metav1.ConditionFalse, fleetv1.ScheduleInvalidReason, err.Error())
		return ctrl.Result{}, nil
	}
	if err := r.ownByClaim(ctx, sched); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.prune(ctx, sched, cron); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying retention: %w", err)
	}
	if sched.Spec.Paused {
		sched.Status.NextRunTime = nil
		setReady(metav1.ConditionFalse, fleetv1.SchedulePausedReason, "paused: no new snapshots; retention still applies")
		return ctrl.Result{}, nil
	}
	if paused, err := r.claimPaused(ctx, sched); err != nil || paused {
		sched.Status.NextRunTime = nil
		setReady(metav1.ConditionFalse, fleetv1.SchedulePausedReason, "the claim is paused (its Cluster is): no new snapshots")
		return ctrl.Result{RequeueAfter: time.Minute}, err
	}
	now := r.now()
	base := sched.CreationTimestamp.Time
	if t := sched.Status.LastRunTime; t != nil && t.After(base) {
		base = t.Time
	}
	next := cron.Next(base)
	if !now.Before(next) {
		// Runs missed while the manager was down collapse into one, at the latest due time.
		due := next
		for i := 0; i < 100000; i++ {
			n := cron.Next(due)
			if n.After(now) || n.IsZero() {
				break
			}
			due = n
		}
		name, err := r.takeSnapshot(ctx, sched, due)
		if err != nil {
			return ctrl.Result{}, err
		}
		sched.Status.LastRunTime, sched.Status.LastSnapshotName = &metav1.Time{Time: due}, name
		next = cron.Next(due)
	}
	sched.Status.NextRunTime = &metav1.Time{Time: next}
	setReady(metav1.ConditionTrue, fleetv1.ScheduleActiveReason, fmt.Sprintf("next snapshot at %s", next.In(cron.Location()).Format(time.RFC3339)))
	return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Second)}, nil
}

// takeSnapshot creates the MachineSnapshot due at due. Its name comes from the due time, so a
// reconcile that runs twice for one due time creates it once.
func (r *Reconciler) takeSnapshot(ctx context.Context, sched *fleetv1.MachineSnapshotSchedule, due time.Time) (string, error) {
	name := fmt.Sprintf("%s-%s", sched.Name, due.UTC().Format("20060102-1504"))
	snap := &fleetv1.MachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sched.Namespace,
			Labels:      map[string]string{fleetv1.MachineSnapshotScheduleLabel: sched.Name},
			Annotations: map[string]string{fleetv1.MachineSnapshotScheduledTimeAnnotation: due.UTC().Format(time.RFC3339)}},
		Spec: fleetv1.MachineSnapshotSpec{Source: sched.Spec.Source, WithMemory: sched.Spec.WithMemory,
			DeletionPolicy: sched.Spec.DeletionPolicy, Description: "taken by MachineSnapshotSchedule " + sched.Name},
	}
	if snap.Spec.DeletionPolicy == "" {
		snap.Spec.DeletionPolicy = fleetv1.SnapshotDeletionPolicyDelete
	}
	if err := r.Client.Create(ctx, snap); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating MachineSnapshot %s: %w", name, err)
	}
	r.Recorder.Eventf(sched, corev1.EventTypeNormal, fleetv1.SnapshotScheduledEventReason, "MachineSnapshot %s taken for %s", name, due.UTC().Format(time.RFC3339))
	return name, nil
}

// prune deletes the schedule's snapshots its retention policy does not keep.
func (r *Reconciler) prune(ctx context.Context, sched *fleetv1.MachineSnapshotSchedule, cron *snapshotschedule.Schedule) error {
	list := &fleetv1.MachineSnapshotList{}
	if err := r.Client.List(ctx, list, client.InNamespace(sched.Namespace),
		client.MatchingLabels{fleetv1.MachineSnapshotScheduleLabel: sched.Name}); err != nil {
		return err
	}
	var items []snapshotschedule.Snapshot
	live := 0
	for _, s := range list.Items {
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		live++
		t := s.CreationTimestamp.Time
		if v, err := time.Parse(time.RFC3339, s.Annotations[fleetv1.MachineSnapshotScheduledTimeAnnotation]); err == nil {
			t = v
		}
		items = append(items, snapshotschedule.Snapshot{Name: s.Name, Time: t,
			Done: s.Status.Phase == fleetv1.MachineSnapshotPhaseSucceeded, Failed: s.Status.Phase == fleetv1.MachineSnapshotPhaseFailed})
	}
	drop := snapshotschedule.Prune(items, retention(sched.Spec.Retention), cron.Location())
	for _, name := range drop {
		s := &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: sched.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return err
		}
		live--
		r.Recorder.Eventf(sched, corev1.EventTypeNormal, fleetv1.SnapshotPrunedEventReason, "MachineSnapshot %s is no longer kept by the retention policy", name)
	}
	sched.Status.Snapshots = int32(live)
	return nil
}

func retention(r *fleetv1.SnapshotRetention) snapshotschedule.Retention {
	if r == nil {
		return snapshotschedule.Retention{}
	}
	n := func(p *int32) int { return int(ptr.Deref(p, 0)) }
	return snapshotschedule.Retention{Count: n(r.Count), Daily: n(r.Daily), Weekly: n(r.Weekly), Monthly: n(r.Monthly)}
}

// ownByClaim makes the schedule go with its claim (clusterctl move, deletion) once the claim exists.
func (r *Reconciler) ownByClaim(ctx context.Context, sched *fleetv1.MachineSnapshotSchedule) error {
	claim := &infrav1.MachineClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sched.Namespace, Name: sched.Spec.Source.MachineClaimName}, claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	return claimvm.SetOwner(r.Client, sched, claim)
}

// claimPaused reports whether the schedule's claim is paused with its Cluster (clusterctl move).
func (r *Reconciler) claimPaused(ctx context.Context, sched *fleetv1.MachineSnapshotSchedule) (bool, error) {
	claim := &infrav1.MachineClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sched.Namespace, Name: sched.Spec.Source.MachineClaimName}, claim); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return conditions.IsTrue(claim, infrav1.PausedCondition), nil
}

// SetupWithManager registers the controller; a schedule's snapshot changing wakes it, so
// retention counts a snapshot as soon as it succeeds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.MachineSnapshotSchedule{}).
		Watches(&fleetv1.MachineSnapshot{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			name := o.GetLabels()[fleetv1.MachineSnapshotScheduleLabel]
			if name == "" {
				return nil
			}
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
		})).
		WithOptions(opts).
		Complete(tracing.Reconciler("machinesnapshotschedule", r))
}
