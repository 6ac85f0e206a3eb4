package machinesnapshotrestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/fresh"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler returns a claim's VM to a snapshot: it holds the claim's run
// strategy (RestoreInProgressAnnotation), stops a running VM, rolls it back, starts it again if it
// ran before, and hands the claim back.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Registry *connection.Registry
	// Audit, when set, records each rollback the controller starts (the audit log).
	Audit claimvm.Audit
	// PollInterval is how often a task is polled. Default 2s.
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshotrestores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshotrestores/status;machinesnapshotrestores/finalizers,verbs=get;update;patch

// Reconcile moves one restore one step on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	rs := &fleetv1.MachineSnapshotRestore{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("MachineClaim", rs.Spec.Target.MachineClaimName))
	if rs.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, rs, fleetv1.MachineSnapshotRestoreFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(rs, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, rs, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition, fleetv1.ProgressingCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !rs.DeletionTimestamp.IsZero() {
		if err := r.releaseClaim(ctx, rs); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(rs, fleetv1.MachineSnapshotRestoreFinalizer)
		return ctrl.Result{}, nil
	}
	if rs.Status.Complete || conditions.GetReason(rs, fleetv1.ReadyCondition) == fleetv1.RestoreFailedReason {
		return ctrl.Result{}, nil // a restore runs once
	}
	return r.reconcileRestore(ctx, rs)
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 2 * time.Second
}

func setRestoreState(rs *fleetv1.MachineSnapshotRestore, ready metav1.ConditionStatus, reason, msg string) {
	conditions.Set(rs, metav1.Condition{Type: fleetv1.ReadyCondition, Status: ready, Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
	progressing := metav1.ConditionFalse
	if ready == metav1.ConditionFalse && reason != fleetv1.RestoreFailedReason {
		progressing = metav1.ConditionTrue
	}
	conditions.Set(rs, metav1.Condition{Type: fleetv1.ProgressingCondition, Status: progressing, Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
}

func (r *Reconciler) reconcileRestore(ctx context.Context, rs *fleetv1.MachineSnapshotRestore) (ctrl.Result, error) {
	snap := &fleetv1.MachineSnapshot{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: rs.Spec.MachineSnapshotName}, snap); err != nil {
		if apierrors.IsNotFound(err) {
			setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreWaitingReason, fmt.Sprintf("MachineSnapshot %s not found", rs.Spec.MachineSnapshotName))
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	if snap.Spec.Source.MachineClaimName != rs.Spec.Target.MachineClaimName {
		return r.fail(ctx, rs, fmt.Sprintf("MachineSnapshot %s is of MachineClaim %s, not %s: a snapshot can only be restored onto the VM it was taken of",
			snap.Name, snap.Spec.Source.MachineClaimName, rs.Spec.Target.MachineClaimName))
	}
	if snap.Status.Phase == fleetv1.MachineSnapshotPhaseFailed {
		return r.fail(ctx, rs, fmt.Sprintf("MachineSnapshot %s failed: %s", snap.Name, snap.Status.Error))
	}
	if !snap.Status.ReadyToUse {
		setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreWaitingReason, fmt.Sprintf("MachineSnapshot %s is not ready to use", snap.Name))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	vm, err := claimvm.Resolve(ctx, r.Client, r.Registry, rs.Namespace, rs.Spec.Target.MachineClaimName)
	var nr *claimvm.NotReady
	switch {
	case errors.As(err, &nr):
		setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreWaitingReason, nr.Message)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if vm.ID() != snap.Status.SourceVMID {
		return r.fail(ctx, rs, fmt.Sprintf("MachineClaim %s has VM %s now; the snapshot was of VM %s", vm.Claim.Name, vm.ID(), snap.Status.SourceVMID))
	}
	if err := claimvm.SetOwner(r.Client, rs, vm.Claim); err != nil {
		return ctrl.Result{}, err
	}
	if holder := vm.Claim.Annotations[infrav1.RestoreInProgressAnnotation]; holder != rs.Name {
		if holder != "" {
			setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreWaitingReason, fmt.Sprintf("MachineSnapshotRestore %s is restoring the claim", holder))
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		if rs.Status.WasRunning != nil {
			// This restore held the claim and has let it go: it is done, and this read of it is
			// older than the status that says so.
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		}
		// Only from a fresh read of this restore: a stale one, from before it completed and let
		// the claim go, would hold the claim and roll the VM back again.
		if stale, err := fresh.PatchStatus(ctx, r.Client, rs, rs.DeepCopy()); err != nil || stale {
			return ctrl.Result{RequeueAfter: time.Millisecond}, err
		}
		// Hold the claim's run strategy first, so an Always VM is not started mid-rollback.
		p := client.MergeFrom(vm.Claim.DeepCopy())
		if vm.Claim.Annotations == nil {
			vm.Claim.Annotations = map[string]string{}
		}
		vm.Claim.Annotations[infrav1.RestoreInProgressAnnotation] = rs.Name
		if err := r.Client.Patch(ctx, vm.Claim, p); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if t := rs.Status.Task; t != nil {
		st, err := vm.Provider.TaskStatus(ctx, t.Node, hypervisor.TaskID(t.ID))
		switch {
		case err != nil && !errors.Is(err, hypervisor.ErrNotFound):
			setRestoreState(rs, metav1.ConditionFalse, hypervisor.Reason(err), err.Error())
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		case err == nil && !st.Done:
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		case err == nil && st.Err != nil:
			rs.Status.Task = nil
			return r.fail(ctx, rs, fmt.Sprintf("%s task failed: %v", t.Operation, st.Err))
		}
		rs.Status.Task = nil
		if t.Operation == fleetv1.SnapshotOperationRollback && err == nil {
			return r.complete(ctx, rs, snap)
		}
	}
	state, err := vm.Provider.VM(ctx, vm.Ref())
	if err != nil {
		setRestoreState(rs, metav1.ConditionFalse, hypervisor.Reason(err), err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	// The VM is stopped and rolled back only from a fresh read: a stale one, older than the task
	// an earlier reconcile recorded, would stop the restored VM and roll it back again, losing
	// what it did since.
	if stale, err := fresh.PatchStatus(ctx, r.Client, rs, rs.DeepCopy()); err != nil || stale {
		return ctrl.Result{RequeueAfter: time.Millisecond}, err
	}
	if rs.Status.WasRunning == nil {
		// Recorded on its own, against the object's resourceVersion: a read of this restore older
		// than the stop it already made (a synchronous provider's stop is over when it returns)
		// would otherwise record the VM it stopped as one that was off.
		base := rs.DeepCopy()
		rs.Status.WasRunning = ptr.To(state.State == hypervisor.PowerStateRunning)
		if stale, err := fresh.PatchStatus(ctx, r.Client, rs, base); err != nil || stale {
			rs.Status.WasRunning = nil
			return ctrl.Result{RequeueAfter: time.Millisecond}, err
		}
	}
	switch {
	case state.Lock != "":
		setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreWaitingReason, fmt.Sprintf("VM %s is locked (%s)", state.Ref, state.Lock))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case state.State != hypervisor.PowerStateStopped:
		task, err := vm.Provider.StopSeen(ctx, state)
		if err != nil {
			setRestoreState(rs, metav1.ConditionFalse, hypervisor.Reason(err), "stopping the VM: "+err.Error())
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		rs.Status.Task = &fleetv1.SnapshotTask{ID: string(task), Node: state.Ref.Node, Operation: fleetv1.SnapshotOperationStop, StartTime: metav1.Now()}
		setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreStoppingReason, fmt.Sprintf("stopping VM %s before the rollback", state.Ref))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	// A snapshot with memory resumes the VM by itself; otherwise a VM that ran is started again.
	start := *rs.Status.WasRunning && !snap.Status.WithMemory
	task, err := vm.Snapshotter.RollbackSnapshot(ctx, vm.Ref(), snap.Status.SnapshotName, start)
	if err != nil {
		if !hypervisor.IsRetryable(err) {
			return r.fail(ctx, rs, "rolling back: "+err.Error())
		}
		setRestoreState(rs, metav1.ConditionFalse, hypervisor.Reason(err), "rolling back: "+err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	rs.Status.Task = &fleetv1.SnapshotTask{ID: string(task), Node: state.Ref.Node, Operation: fleetv1.SnapshotOperationRollback, StartTime: metav1.Now()}
	setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreRollingBackReason, fmt.Sprintf("rolling VM %s back to %s", state.Ref, snap.Status.SnapshotName))
	r.Recorder.Eventf(rs, corev1.EventTypeNormal, fleetv1.RestoreRollingBackReason, "rolling VM %s back to snapshot %s", state.Ref, snap.Status.SnapshotName)
	claimvm.Changed(r.Audit, vm, "restore-vm", fmt.Sprintf("MachineSnapshotRestore %s: rolling back to snapshot %s (MachineSnapshot %s)", rs.Name, snap.Status.SnapshotName, snap.Name))
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

func (r *Reconciler) complete(ctx context.Context, rs *fleetv1.MachineSnapshotRestore, snap *fleetv1.MachineSnapshot) (ctrl.Result, error) {
	if err := r.releaseClaim(ctx, rs); err != nil {
		return ctrl.Result{}, err
	}
	rs.Status.Complete, rs.Status.RestoreTime = true, &metav1.Time{Time: time.Now()}
	setRestoreState(rs, metav1.ConditionTrue, fleetv1.RestoreCompleteReason, fmt.Sprintf("VM is back at snapshot %s (MachineSnapshot %s)", snap.Status.SnapshotName, snap.Name))
	r.Recorder.Eventf(rs, corev1.EventTypeNormal, fleetv1.RestoreCompleteReason, "restored MachineSnapshot %s", snap.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) fail(ctx context.Context, rs *fleetv1.MachineSnapshotRestore, msg string) (ctrl.Result, error) {
	if err := r.releaseClaim(ctx, rs); err != nil {
		return ctrl.Result{}, err
	}
	setRestoreState(rs, metav1.ConditionFalse, fleetv1.RestoreFailedReason, msg)
	r.Recorder.Event(rs, corev1.EventTypeWarning, fleetv1.RestoreFailedReason, msg)
	return ctrl.Result{}, nil
}

// releaseClaim hands the claim back to its run strategy if this restore holds it. A JSON patch
// that tests the annotation's value removes it only while it names this restore, without trusting
// a cached read of the claim.
func (r *Reconciler) releaseClaim(ctx context.Context, rs *fleetv1.MachineSnapshotRestore) error {
	_, err := claimvm.RemoveAnnotation(ctx, r.Client, rs.Namespace, rs.Spec.Target.MachineClaimName, infrav1.RestoreInProgressAnnotation, rs.Name)
	return err
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.MachineSnapshotRestore{}).
		WithOptions(opts).
		Complete(tracing.Reconciler("machinesnapshotrestore", r))
}
