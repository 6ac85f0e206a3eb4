package machineclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
)

// acquireSlot asks for the slot op needs before the claim calls the hypervisor. It returns a
// non-zero result while the claim waits: a wait is not a failure, so nothing backs off, and the
// claim is woken when its turn comes (the requeue is only a safety net).
func (r *Reconciler) acquireSlot(ctx context.Context, s *claimScope, op capacity.Operation) (ctrl.Result, error) {
	if s.hc == nil {
		return ctrl.Result{}, nil
	}
	rt := r.cluster(s)
	aq, err := rt.Queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait := aq.ThrottledFor(); wait > 0 {
		return r.throttled(s, wait)
	}
	req := clusterruntime.SlotRequest(s.claim, op)
	ok, woken := aq.Acquire(req)
	rt.Wake(woken)
	if ok {
		return ctrl.Result{}, nil
	}
	l := aq.Limits()
	msg := fmt.Sprintf("waiting for a clone slot on %s (limits: %d clones per host, %d clones and destroys per storage)", req.Host, l.ClonesPerHost, l.TasksPerStorage)
	if op == capacity.OpDelete {
		msg = fmt.Sprintf("waiting for a delete slot on %s (limits: %d deletes per host, %d clones and destroys per storage)", req.Host, l.DeletesPerHost, l.TasksPerStorage)
	}
	if wait := aq.ThrottledFor(); wait > 0 {
		return r.throttled(s, wait)
	}
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForSlotReason, msg)
	return ctrl.Result{RequeueAfter: slotSafetyNet}, nil
}

// slotSafetyNet brings a waiting claim back even if its wake-up were lost.
const slotSafetyNet = time.Minute

// throttled makes the claim wait out its cluster's backoff after an overload, without counting a
// failure.
func (r *Reconciler) throttled(s *claimScope, wait time.Duration) (ctrl.Result, error) {
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.HypervisorThrottledReason,
		fmt.Sprintf("HypervisorCluster %s refused work or timed out on a lock; all its claims wait %s", s.hc.Name, wait.Round(100*time.Millisecond)))
	return ctrl.Result{RequeueAfter: wait}, nil
}

// releaseSlot gives back the claim's slot at once, when its task is known to be over before the
// reconcile ends, and wakes the next claim in line.
func (r *Reconciler) releaseSlot(s *claimScope) {
	if s.hc == nil {
		return
	}
	rt := r.cluster(s)
	if aq := rt.ExistingQueue(); aq != nil {
		rt.Wake(aq.Release(clusterruntime.ClaimKey(s.claim)))
	}
}

// settleSlots runs after every reconcile: a claim holds a slot exactly while its recorded task
// needs one, so a finished, failed or forgotten task, a released claim or a failed call gives
// the slot back and wakes the next claim in line.
func (r *Reconciler) settleSlots(s *claimScope) {
	if s.hc == nil {
		return
	}
	rt := r.cluster(s)
	aq := rt.ExistingQueue()
	if aq == nil {
		return
	}
	key := clusterruntime.ClaimKey(s.claim)
	op, needed := clusterruntime.SlotOperation(s.claim)
	released := !controllerutil.ContainsFinalizer(s.claim, infrav1.MachineClaimFinalizer)
	if released || s.claim.Status.Node == "" || s.claim.Status.CompletedStep == infrav1.StepStarted {
		rt.Unpromise(s.claim)
	}
	switch {
	case released:
		rt.Wake(aq.Release(key))
	case needed && aq.Holds(key, op):
	case needed:
		// A task this process did not start through the queue (a restart adopted it).
		aq.Hold(clusterruntime.SlotRequest(s.claim, op))
	case aq.Holds(key, capacity.OpClone) || aq.Holds(key, capacity.OpDelete):
		rt.Wake(aq.Release(key))
	}
	rt.Record(aq)
}

// DefaultCapacityRecheck is how long a claim waiting for capacity waits for a wake-up before it
// looks for room by itself.
const DefaultCapacityRecheck = 2 * time.Minute

func (r *Reconciler) capacityRecheck() time.Duration {
	if r.CapacityRecheck > 0 {
		return r.CapacityRecheck
	}
	return DefaultCapacityRecheck
}

// awaitCapacityTurn keeps a claim behind the claims already waiting for capacity on its cluster,
// so the oldest, fair across pools, get the room that frees.
// fresh is true when the claim comes from the line: room freed since the shared node listing was
// made, so it must look at the hosts anew.
func (r *Reconciler) awaitCapacityTurn(ctx context.Context, s *claimScope) (_ ctrl.Result, fresh bool, _ error) {
	rt := r.cluster(s)
	aq, err := rt.Queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if may, waited := aq.MayPlaceAfterWait(clusterruntime.SlotRequest(s.claim, capacity.OpCapacity), r.capacityRecheck()); may {
		return ctrl.Result{}, waited, nil
	}
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.NoCapacityReason,
		fmt.Sprintf("waiting for capacity on HypervisorCluster %s, in line with %d other claim(s); woken when a VM of the cluster is removed", s.hc.Name, clusterruntime.WaitingForCapacity(aq)-1))
	rt.Record(aq)
	return ctrl.Result{RequeueAfter: r.capacityRecheck()}, false, nil
}

// noCapacity puts a claim no host has room for in the capacity line. Waiting for room is not a
// failure: no backoff grows, and a VM of the cluster being removed wakes the next claim in line.
func (r *Reconciler) noCapacity(ctx context.Context, s *claimScope, msg string) (ctrl.Result, error) {
	rt := r.cluster(s)
	aq, err := rt.Queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	aq.NoCapacity(clusterruntime.SlotRequest(s.claim, capacity.OpCapacity))
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.NoCapacityReason, msg+"; waiting until a VM of the cluster is removed")
	rt.Record(aq)
	return ctrl.Result{RequeueAfter: r.capacityRecheck()}, nil
}

// placed takes a claim that found room out of the capacity line; room may be left for the next.
// The room it took is remembered until the claim's VM runs.
func (r *Reconciler) placed(s *claimScope, node string, memoryMiB int) {
	r.cluster(s).Promise(s.claim, node, memoryMiB)
}

// overloaded handles a lock timeout or a refused call: the whole cluster backs off once, with
// bounded exponential backoff and jitter, and the claim waits with the others. It is not the
// VM's failure, so the claim's own backoff does not grow.
func (r *Reconciler) overloaded(ctx context.Context, s *claimScope, err error) (ctrl.Result, error) {
	aq, qerr := r.cluster(s).Queue(ctx, s.hc)
	if qerr != nil {
		return ctrl.Result{}, qerr
	}
	wait := aq.Throttle()
	ctrl.LoggerFrom(ctx).Info("hypervisor overloaded; the cluster's queue backs off", "error", err.Error(), "wait", wait)
	return r.throttled(s, wait)
}

// awaitThrottle holds a claim's hypervisor calls while its cluster backs off.
func (r *Reconciler) awaitThrottle(s *claimScope) (ctrl.Result, error) {
	if s.hc == nil {
		return ctrl.Result{}, nil
	}
	if aq := r.cluster(s).ExistingQueue(); aq != nil {
		if wait := aq.ThrottledFor(); wait > 0 {
			return r.throttled(s, wait)
		}
	}
	return ctrl.Result{}, nil
}

// relieve records that the hypervisor took work again: its next overload backs off from the base.
func (r *Reconciler) relieve(s *claimScope) {
	if s.hc == nil {
		return
	}
	if aq := r.cluster(s).ExistingQueue(); aq != nil {
		aq.Relieve()
	}
}
