package machinesnapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler takes one hypervisor snapshot per MachineSnapshot and removes it when
// the object is deleted (deletionPolicy Delete).
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Registry *connection.Registry
	// Audit, when set, records each snapshot the controller takes or removes (the audit log).
	Audit claimvm.Audit
	// PollInterval is how often a snapshot task is polled. Default 2s.
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshots,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshots/status;machinesnapshots/finalizers,verbs=get;update;patch

// Reconcile moves one MachineSnapshot one step on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	snap := &fleetv1.MachineSnapshot{}
	if err := r.Client.Get(ctx, req.NamespacedName, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("MachineClaim", snap.Spec.Source.MachineClaimName))
	if snap.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, snap, fleetv1.MachineSnapshotFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(snap, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, snap, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !snap.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, snap)
	}
	return r.reconcileNormal(ctx, snap)
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 2 * time.Second
}

// snapshotName is the hypervisor snapshot's name: fixed by the object's UID, so a restarted
// controller finds a snapshot it took but did not record.
func snapshotName(snap *fleetv1.MachineSnapshot) string {
	return "hf-" + strings.ReplaceAll(string(snap.UID), "-", "")
}

func setSnapshotReady(snap *fleetv1.MachineSnapshot, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(snap, metav1.Condition{Type: fleetv1.ReadyCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: snap.Generation})
}

func (r *Reconciler) reconcileNormal(ctx context.Context, snap *fleetv1.MachineSnapshot) (ctrl.Result, error) {
	switch snap.Status.Phase {
	case fleetv1.MachineSnapshotPhaseSucceeded, fleetv1.MachineSnapshotPhaseFailed:
		// A snapshot is taken once. A task left beside the outcome was recorded by a reconcile
		// that a read older than the task's start then overtook (a synchronous provider's snapshot
		// is listed at once): it is over.
		snap.Status.Task = nil
		return ctrl.Result{}, nil
	case "":
		snap.Status.Phase = fleetv1.MachineSnapshotPhaseInProgress
	}
	vm, err := claimvm.Resolve(ctx, r.Client, r.Registry, snap.Namespace, snap.Spec.Source.MachineClaimName)
	var nr *claimvm.NotReady
	switch {
	case errors.As(err, &nr):
		setSnapshotReady(snap, metav1.ConditionFalse, nr.Reason, nr.Message)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if err := claimvm.SetOwner(r.Client, snap, vm.Claim); err != nil {
		return ctrl.Result{}, err
	}
	if t := snap.Status.Task; t != nil {
		return r.reconcileTask(ctx, snap, vm)
	}
	if snap.Status.SnapshotName == "" {
		// Recorded before the snapshot is taken: the name and VM survive a restart.
		snap.Status.SnapshotName = snapshotName(snap)
		snap.Status.SourceVMID, snap.Status.SourceNode = vm.ID(), vm.Claim.Status.Node
		setSnapshotReady(snap, metav1.ConditionFalse, fleetv1.SnapshotInProgressReason, "taking snapshot "+snap.Status.SnapshotName)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if vm.ID() != snap.Status.SourceVMID {
		return r.failed(snap, fleetv1.SourceVMGoneReason, fmt.Sprintf("MachineClaim %s now has VM %s, not VM %s this snapshot was for",
			vm.Claim.Name, vm.ID(), snap.Status.SourceVMID))
	}
	if done, err := r.recordExisting(ctx, snap, vm); err != nil || done {
		return ctrl.Result{}, err
	}
	state, err := vm.Provider.VM(ctx, vm.Ref())
	if err != nil {
		return r.hypervisorError(snap, "reading the VM", err)
	}
	if state.Lock != "" {
		setSnapshotReady(snap, metav1.ConditionFalse, fleetv1.SnapshotInProgressReason, fmt.Sprintf("VM %s is locked (%s); waiting", state.Ref, state.Lock))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	task, err := vm.Snapshotter.CreateSnapshot(ctx, vm.Ref(), hypervisor.SnapshotSpec{Name: snap.Status.SnapshotName,
		Description: snapshotDescription(snap), WithMemory: snap.Spec.WithMemory})
	if err != nil {
		return r.hypervisorError(snap, "taking the snapshot", err)
	}
	snap.Status.Task = &fleetv1.SnapshotTask{ID: string(task), Node: vm.Claim.Status.Node, Operation: fleetv1.SnapshotOperationSnapshot, StartTime: metav1.Now()}
	setSnapshotReady(snap, metav1.ConditionFalse, fleetv1.SnapshotInProgressReason, fmt.Sprintf("snapshot task %s running", task))
	r.Recorder.Eventf(snap, corev1.EventTypeNormal, fleetv1.SnapshottingEventReason, "taking snapshot %s of VM %s", snap.Status.SnapshotName, vm.Ref())
	claimvm.Changed(r.Audit, vm, "snapshot-vm", fmt.Sprintf("MachineSnapshot %s: taking snapshot %s", snap.Name, snap.Status.SnapshotName))
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

func snapshotDescription(snap *fleetv1.MachineSnapshot) string {
	d := fmt.Sprintf("HyperFleet MachineSnapshot %s/%s", snap.Namespace, snap.Name)
	if snap.Spec.Description != "" {
		d += ": " + snap.Spec.Description
	}
	return d
}

// recordExisting marks the snapshot taken when the hypervisor already has it.
func (r *Reconciler) recordExisting(ctx context.Context, snap *fleetv1.MachineSnapshot, vm *claimvm.VM) (bool, error) {
	list, err := vm.Snapshotter.Snapshots(ctx, vm.Ref())
	if err != nil {
		_, err = r.hypervisorError(snap, "listing snapshots", err)
		return true, err
	}
	for _, s := range list {
		if s.Name == snap.Status.SnapshotName {
			snap.Status.Phase, snap.Status.ReadyToUse, snap.Status.WithMemory = fleetv1.MachineSnapshotPhaseSucceeded, true, s.WithMemory
			t := s.Time
			if t.IsZero() {
				t = time.Now()
			}
			snap.Status.CreationTime, snap.Status.Error = &metav1.Time{Time: t}, ""
			setSnapshotReady(snap, metav1.ConditionTrue, fleetv1.SnapshotTakenReason, fmt.Sprintf("snapshot %s of VM %s", s.Name, vm.Ref()))
			return true, nil
		}
	}
	return false, nil
}

// reconcileTask follows the snapshot task; a failed task fails the snapshot with the hypervisor's
// words.
func (r *Reconciler) reconcileTask(ctx context.Context, snap *fleetv1.MachineSnapshot, vm *claimvm.VM) (ctrl.Result, error) {
	t := snap.Status.Task
	st, err := vm.Provider.TaskStatus(ctx, t.Node, hypervisor.TaskID(t.ID))
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		snap.Status.Task = nil // forgotten by the hypervisor: look at the snapshots again
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	case err != nil:
		return r.hypervisorError(snap, "polling the snapshot task", err)
	case !st.Done:
		deadline := 5 * time.Minute
		if d := snap.Spec.FailureDeadline; d != nil && d.Duration > 0 {
			deadline = d.Duration
		}
		late := time.Since(t.StartTime.Time)
		if late > deadline {
			// The snapshot may still appear; deleting this object removes it then.
			return r.failed(snap, fleetv1.SnapshotFailedReason, fmt.Sprintf("snapshot task %s still running after %s (failureDeadline %s)",
				t.ID, late.Round(time.Second), deadline))
		}
		return ctrl.Result{RequeueAfter: min(r.poll(), max(deadline-late, time.Millisecond))}, nil
	}
	snap.Status.Task = nil
	if st.Err != nil {
		return r.failed(snap, fleetv1.SnapshotFailedReason, st.Err.Error())
	}
	if done, err := r.recordExisting(ctx, snap, vm); err != nil || done {
		if done && snap.Status.ReadyToUse {
			r.Recorder.Eventf(snap, corev1.EventTypeNormal, fleetv1.SnapshotTakenReason, "snapshot %s of VM %s taken", snap.Status.SnapshotName, vm.Ref())
		}
		return ctrl.Result{}, err
	}
	return r.failed(snap, fleetv1.SnapshotFailedReason, "the snapshot task ended but the snapshot is not listed")
}

func (r *Reconciler) failed(snap *fleetv1.MachineSnapshot, reason, msg string) (ctrl.Result, error) {
	snap.Status.Phase, snap.Status.ReadyToUse, snap.Status.Error = fleetv1.MachineSnapshotPhaseFailed, false, msg
	setSnapshotReady(snap, metav1.ConditionFalse, reason, msg)
	r.Recorder.Event(snap, corev1.EventTypeWarning, reason, msg)
	return ctrl.Result{}, nil
}

// hypervisorError reports a failed call; refusals that retrying cannot fix fail the snapshot.
func (r *Reconciler) hypervisorError(snap *fleetv1.MachineSnapshot, what string, err error) (ctrl.Result, error) {
	msg := fmt.Sprintf("%s: %v", what, err)
	if !hypervisor.IsRetryable(err) && !errors.Is(err, hypervisor.ErrForbidden) {
		return r.failed(snap, fleetv1.SnapshotFailedReason, msg)
	}
	snap.Status.Error = msg
	setSnapshotReady(snap, metav1.ConditionFalse, hypervisor.Reason(err), msg)
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

// reconcileDelete removes the hypervisor snapshot (deletionPolicy Delete) before the object goes.
// A VM or claim that is gone took its snapshots with it.
func (r *Reconciler) reconcileDelete(ctx context.Context, snap *fleetv1.MachineSnapshot) (ctrl.Result, error) {
	snap.Status.Phase = fleetv1.MachineSnapshotPhaseDeleting
	release := func(why string) (ctrl.Result, error) {
		ctrl.LoggerFrom(ctx).V(1).Info("releasing MachineSnapshot", "why", why)
		controllerutil.RemoveFinalizer(snap, fleetv1.MachineSnapshotFinalizer)
		return ctrl.Result{}, nil
	}
	if snap.Spec.DeletionPolicy == fleetv1.SnapshotDeletionPolicyRetain {
		return release("deletionPolicy Retain")
	}
	if _, moving := snap.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
		// clusterctl move deletes the source copy once the target has it: the snapshot is the
		// moved object's now.
		return release("moved to another management cluster by clusterctl; the snapshot stays")
	}
	if snap.Status.SnapshotName == "" {
		return release("no snapshot was taken")
	}
	vm, err := claimvm.Resolve(ctx, r.Client, r.Registry, snap.Namespace, snap.Spec.Source.MachineClaimName)
	var nr *claimvm.NotReady
	switch {
	case errors.As(err, &nr) && (nr.Reason == fleetv1.SourceNotFoundReason || (vm != nil && vm.HCGone)):
		return release("the claim or its HypervisorCluster is gone, and the VM's snapshots with it")
	case errors.As(err, &nr) && vm != nil && !vm.Claim.DeletionTimestamp.IsZero():
		return release("the claim is being deleted; destroying its VM removes the snapshot")
	case errors.As(err, &nr):
		setSnapshotReady(snap, metav1.ConditionFalse, nr.Reason, "cannot remove the snapshot yet: "+nr.Message)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if vm.ID() != snap.Status.SourceVMID {
		return release("the snapshot's VM is gone")
	}
	if t := snap.Status.Task; t != nil {
		st, err := vm.Provider.TaskStatus(ctx, t.Node, hypervisor.TaskID(t.ID))
		switch {
		case err != nil && !errors.Is(err, hypervisor.ErrNotFound):
			return r.hypervisorError(snap, "polling the task", err)
		case err == nil && !st.Done:
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		case err == nil && st.Err != nil && t.Operation == fleetv1.SnapshotOperationDeleteSnapshot:
			snap.Status.Error = st.Err.Error()
			r.Recorder.Eventf(snap, corev1.EventTypeWarning, fleetv1.SnapshotFailedReason, "removing snapshot %s: %v", snap.Status.SnapshotName, st.Err)
		}
		snap.Status.Task = nil
	}
	list, err := vm.Snapshotter.Snapshots(ctx, vm.Ref())
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		return release("the VM is gone")
	case err != nil:
		return r.hypervisorError(snap, "listing snapshots", err)
	}
	found := false
	for _, s := range list {
		found = found || s.Name == snap.Status.SnapshotName
	}
	if !found {
		r.Recorder.Eventf(snap, corev1.EventTypeNormal, fleetv1.SnapshotRemovedEventReason, "snapshot %s of VM %s removed", snap.Status.SnapshotName, vm.Ref())
		return release("the hypervisor snapshot is gone")
	}
	task, err := vm.Snapshotter.DeleteSnapshot(ctx, vm.Ref(), snap.Status.SnapshotName)
	if err != nil {
		return r.hypervisorError(snap, "removing the snapshot", err)
	}
	snap.Status.Task = &fleetv1.SnapshotTask{ID: string(task), Node: vm.Claim.Status.Node, Operation: fleetv1.SnapshotOperationDeleteSnapshot, StartTime: metav1.Now()}
	claimvm.Changed(r.Audit, vm, "delete-snapshot", fmt.Sprintf("MachineSnapshot %s deleted: removing snapshot %s", snap.Name, snap.Status.SnapshotName))
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.MachineSnapshot{}).
		WithOptions(opts).
		Complete(tracing.Reconciler("machinesnapshot", r))
}
