package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// reconcileDelete stops the VM, destroys it, confirms it is gone, and only then releases the claim.
// A VM that is not this claim's (foreign, or another claim's) is never touched.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if _, moving := c.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
		// clusterctl move deletes the source copy once the target has it: the VM is the moved
		// claim's now.
		return r.release(ctx, s, "moved to another management cluster by clusterctl; the VM stays")
	}
	setVMCondition(c, metav1.ConditionFalse, infrav1.DeletingReason, "deleting the VM")
	if c.Status.VMID == "" && c.Status.Node == "" {
		return r.release(ctx, s, "no VM was created")
	}
	hc, err := r.hypervisorCluster(ctx, s)
	if apierrors.IsNotFound(err) {
		r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.HypervisorClusterNotFoundEventReason,
			"VM %s cannot be removed: its HypervisorCluster is gone; delete it by hand if it still exists", claimvm.Ref(c))
		return r.release(ctx, s, "HypervisorCluster gone")
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	s.hc = hc
	if s.provider, err = r.Registry.Get(ctx, hc); err != nil {
		setVMCondition(c, metav1.ConditionFalse, infrav1.HypervisorClusterUnavailableReason,
			fmt.Sprintf("cannot reach HypervisorCluster %s to delete VM %s: %v", hc.Name, claimvm.Ref(c), err))
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	}
	if c.Status.VMID == "" {
		// A provider that assigns IDs may have created the VM in a call whose answer was lost:
		// the claim's ownership marks find it.
		vm, found, err := r.findOwnVM(ctx, s)
		if err != nil {
			return r.fail(ctx, s, err)
		}
		if !found {
			return r.release(ctx, s, "no VM was created")
		}
		c.Status.VMID, c.Status.Node = vm.Ref.ID, vm.Ref.Node
	}
	ref := claimvm.Ref(c)
	var (
		vm   hypervisor.VM
		read bool
	)
	if t := c.Status.Task; t != nil && (t.Operation == infrav1.TaskStop || t.Operation == infrav1.TaskDelete) {
		// Not before a stop or destroy typically ends, then backing off, however often the claim
		// is woken meanwhile.
		if wait := r.untilTaskRead(c); wait > 0 && time.Since(t.StartTime.Time) <= r.taskDeadline() {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		// The VM shows a stop or destroy that has ended; its task is read only while it does not,
		// so a failed task is still reported.
		vm, err = s.provider.VM(ctx, ref)
		read = true
		r.polls.read(c.UID, t.ID)
		if taskOutcomeSeen(t.Operation, vm, err) {
			taskSeenOver(s, t)
			c.Status.Task = nil
			r.polls.done(c.UID)
		}
	}
	var overdue string
	if t := c.Status.Task; t != nil && time.Since(t.StartTime.Time) > r.taskDeadline() {
		// A task that never ends (a hung node, a stuck storage) must not hold the claim, or its VM,
		// for ever: forget it, look at the VM again and act anew. Nothing is released before the
		// VM is seen gone.
		overdue = fmt.Sprintf("%s task %s on %s ran for %s, past the %s deadline", t.Operation, t.ID, t.Node,
			time.Since(t.StartTime.Time).Round(time.Second), r.taskDeadline())
		r.Recorder.Event(c, corev1.EventTypeWarning, infrav1.TaskTimedOutReason, overdue+"; checking the VM and acting anew")
		ctrl.LoggerFrom(ctx).Info("in-flight task overdue; acting anew", "operation", t.Operation, "task", t.ID)
		c.Status.Task, read = nil, false
	}
	if c.Status.Task != nil {
		readTask := r.reconcileInFlightTask
		if read {
			readTask = r.readInFlightTask // the VM was read for this round already
		}
		if res, err := readTask(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
		read = false // the task has just ended: look again
	}
	if overdue != "" {
		res, err := r.reconcileDeleteVM(ctx, s, ref, vm, err, read)
		if c.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(c, infrav1.MachineClaimFinalizer) {
			setVMCondition(c, metav1.ConditionFalse, infrav1.TaskTimedOutReason,
				overdue+"; "+conditions.GetMessage(c, infrav1.MachineClaimVMProvisionedCondition))
		}
		return res, err
	}
	return r.reconcileDeleteVM(ctx, s, ref, vm, err, read)
}

// reconcileDeleteVM looks at the VM (unless read already did) and takes the next step: stop it,
// destroy it, or release the claim once it is gone.
func (r *Reconciler) reconcileDeleteVM(ctx context.Context, s *claimScope, ref hypervisor.VMRef,
	vm hypervisor.VM, err error, read bool) (ctrl.Result, error) {
	c := s.claim

	if wait := r.backoffRemaining(c); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if res, err := r.awaitThrottle(s); err != nil || !res.IsZero() {
		return res, err
	}
	if !read && !c.Spec.IsPersistent() {
		// Take the delete slot before reading the VM: a claim that waited for it after its read
		// would read the VM again at every wake-up. (A persistent VM's graceful stop may take
		// long, and holds no slot while it lasts.)
		if res, err := r.acquireSlot(ctx, s, capacity.OpDelete); err != nil || !res.IsZero() {
			return res, err
		}
	}
	if !read {
		vm, err = s.provider.VM(ctx, ref)
	}
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		// Its memory is free: the next claim waiting for capacity may fit now.
		r.cluster(s).CapacityFreed()
		why := fmt.Sprintf("VM %s is gone", ref)
		r.history().VMDestroyed(c, s.hc, why)
		return r.release(ctx, s, why)
	case err != nil:
		return r.fail(ctx, s, err)
	case claimvm.LegacyOf(vm, c):
		return r.adoptLegacyVM(ctx, s)
	case !claimvm.OwnedBy(vm, c):
		return r.release(ctx, s, fmt.Sprintf("VM %s belongs to someone else and was left alone", ref))
	case vm.Lock != "":
		setVMCondition(c, metav1.ConditionFalse, infrav1.DeletingReason, fmt.Sprintf("VM %s is locked (%s)", ref, vm.Lock))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case vm.State != hypervisor.PowerStateStopped && c.Spec.IsPersistent():
		// A long-lived VM gets its preStop hook and a guest shutdown before it is powered off.
		if c.Status.PendingStop == nil {
			r.beginGracefulStop(s, "the claim is being deleted")
		}
		if c.Status.Hook != nil {
			return r.reconcileHook(ctx, s)
		}
		return r.reconcileGracefulStop(ctx, s, vm)
	case vm.State != hypervisor.PowerStateStopped:
		if res, err := r.acquireSlot(ctx, s, capacity.OpDelete); err != nil || !res.IsZero() {
			return res, err
		}
		// The read above, of this reconcile, proved the VM ours: it is not read again.
		task, err := s.provider.StopSeen(ctx, vm)
		if err != nil {
			return r.fail(ctx, s, err)
		}
		return r.recordTask(s, infrav1.TaskStop, ref.Node, task)
	}
	if res, err := r.acquireSlot(ctx, s, capacity.OpDelete); err != nil || !res.IsZero() {
		return res, err
	}
	task, err := s.provider.DeleteSeen(ctx, vm)
	if err != nil {
		return r.fail(ctx, s, err)
	}
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.DeletingEventReason, "destroying VM %s", ref)
	return r.recordTask(s, infrav1.TaskDelete, ref.Node, task)
}

// taskOutcomeSeen reports whether a read of the VM shows that its stop or destroy has ended well.
func taskOutcomeSeen(op string, vm hypervisor.VM, err error) bool {
	switch op {
	case infrav1.TaskStop:
		return err == nil && vm.State == hypervisor.PowerStateStopped && vm.Lock == ""
	case infrav1.TaskDelete:
		return errors.Is(err, hypervisor.ErrNotFound)
	}
	return false
}

func (r *Reconciler) release(ctx context.Context, s *claimScope, why string) (ctrl.Result, error) {
	if _, moving := s.claim.Annotations[clusterctlv1.DeleteForMoveAnnotation]; !moving {
		// A moved claim's addresses stay with it; any other claim's go back to their pools.
		if err := r.releaseNetworkAddresses(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.releaseIPAddresses(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	ctrl.LoggerFrom(ctx).Info("releasing MachineClaim", "why", why)
	r.Recorder.Event(s.claim, corev1.EventTypeNormal, infrav1.ReleasedEventReason, why)
	conditions.Set(s.claim, metav1.Condition{Type: infrav1.MachineClaimVMProvisionedCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.DeletingReason, Message: why})
	controllerutil.RemoveFinalizer(s.claim, infrav1.MachineClaimFinalizer)
	r.polls.done(s.claim.UID)
	return ctrl.Result{}, nil
}
