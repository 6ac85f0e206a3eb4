package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// ClaimQueues keeps each HypervisorCluster within spec.limits: the capacity queues (pkg/capacity) of the
// manager, shared by the MachineClaim controller (which waits for slots and gives them back) and
// the HypervisorCluster controller (which reports capacity freed). They live in the leader's
// memory; a new leader rebuilds them from the claims' status.task, so tasks in flight keep
// their slots.
type ClaimQueues struct {
	client client.Client
	set    capacity.Set
	// wakeups reconciles a claim whose turn came; the MachineClaim controller watches it.
	wakeups chan event.TypedGenericEvent[*infrav1.MachineClaim]
	mu      sync.Mutex
	// freeMemory is each cluster's free memory at its last health check.
	freeMemory map[string]uint64
	// placements are the nodes and memory promised to claims not yet running, by cluster and
	// claim, until the cache shows them: a claim woken right after another was placed must not
	// take the same room because the cache has not seen the first reservation yet.
	placements map[string]map[string]promisedRoom
}

type promisedRoom struct {
	node      string
	memoryMiB int
}

// NewClaimQueues returns empty queues; c reads the claims a new queue starts from.
func NewClaimQueues(c client.Client) *ClaimQueues {
	return &ClaimQueues{client: c, wakeups: make(chan event.TypedGenericEvent[*infrav1.MachineClaim], 1024),
		freeMemory: map[string]uint64{}, placements: map[string]map[string]promisedRoom{}}
}

func clusterKey(hc *infrav1.HypervisorCluster) string { return hc.Namespace + "/" + hc.Name }

func limitsOf(hc *infrav1.HypervisorCluster) capacity.Limits {
	l := hc.Spec.Limits
	return capacity.Limits{ClonesPerHost: int(l.ClonesPerHost), TasksPerStorage: int(l.TasksPerStorage), DeletesPerHost: int(l.DeletesPerHost)}
}

// queue returns hc's queue; the first use records the tasks its claims have in flight.
func (q *ClaimQueues) queue(ctx context.Context, hc *infrav1.HypervisorCluster) (*capacity.Queue, error) {
	key := clusterKey(hc)
	aq, grants, err := q.set.For(key, limitsOf(hc), func(aq *capacity.Queue) error {
		claims := &infrav1.MachineClaimList{}
		if err := q.client.List(ctx, claims, client.InNamespace(hc.Namespace),
			client.MatchingLabels{infrav1.HypervisorClusterNameLabel: hc.Name}); err != nil {
			return fmt.Errorf("listing the claims of %s: %w", key, err)
		}
		for i := range claims.Items {
			c := &claims.Items[i]
			if op, ok := slotOperation(c); ok {
				aq.Hold(slotRequest(c, op))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	q.wake(key, grants)
	return aq, nil
}

// slotOperation is the slot a claim's recorded task holds, if any.
func slotOperation(c *infrav1.MachineClaim) (capacity.Operation, bool) {
	if t := c.Status.Task; t != nil {
		switch t.Operation {
		case opClone:
			return capacity.OpClone, true
		case opStop, opDelete:
			if !c.DeletionTimestamp.IsZero() {
				return capacity.OpDelete, true
			}
		}
	}
	return "", false
}

// slotRequest is c asking for a slot for op: fair across its pool (a RunnerPool's runners, or a
// VMPool's VMs, share one turn; a standalone claim takes its namespace's), oldest claim first.
func slotRequest(c *infrav1.MachineClaim, op capacity.Operation) capacity.Request {
	pool := "namespace/" + c.Namespace
	if p := c.Labels[fleetv1.RunnerPoolNameLabel]; p != "" {
		pool = "runnerpool/" + c.Namespace + "/" + p
	} else if p := c.Labels[fleetv1.VMPoolNameLabel]; p != "" {
		pool = "vmpool/" + c.Namespace + "/" + p
	}
	r := capacity.Request{Key: c.Namespace + "/" + c.Name, Pool: pool, Op: op, Host: c.Status.Node, Created: c.CreationTimestamp.Time}
	if op == capacity.OpClone || op == capacity.OpDelete {
		r.Storage = vmStorage(c)
	}
	return r
}

// vmStorage names the storage whose lock the claim's clone and its VM's destroy take on its node:
// a full clone's target storage, else the template's (a linked clone writes next to the
// template's disk). It depends only on the claim's spec and node, never on whether the template
// was recorded yet, so every claim cloning to one storage counts against the same limit.
// Templates of one node on different storages share one name: that errs on the side of fewer
// tasks at once, never more.
func vmStorage(c *infrav1.MachineClaim) string {
	if p := c.Spec.Proxmox; p != nil && p.Storage != "" && c.Spec.CloneMode == infrav1.CloneFull {
		return c.Status.Node + "/" + p.Storage
	}
	return c.Status.Node + "/template-storage"
}

// wake reconciles the claims whose turn came and records how long they waited.
func (q *ClaimQueues) wake(cluster string, grants []capacity.Grant) {
	for _, g := range grants {
		metrics.ObserveQueueWait(cluster, string(g.Op), g.Waited)
		ns, name, _ := strings.Cut(g.Key, "/")
		ev := event.TypedGenericEvent[*infrav1.MachineClaim]{Object: &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
		select {
		case q.wakeups <- ev:
		default:
			// The controller is behind: never block a reconcile on it.
			go func() { q.wakeups <- ev }()
		}
	}
}

// record publishes the cluster's queue metrics.
func (q *ClaimQueues) record(cluster string, aq *capacity.Queue) {
	st := aq.Stats()
	waitingCapacity := 0
	for _, n := range st.WaitingForCapacity {
		waitingCapacity += n
	}
	metrics.SetQueue(cluster,
		map[string]int{"clone": st.Waiting[capacity.OpClone], "delete": st.Waiting[capacity.OpDelete], "capacity": waitingCapacity},
		map[string]int{"clone": st.InFlight[capacity.OpClone], "delete": st.InFlight[capacity.OpDelete]})
}

// Forget drops a deleted cluster's queue.
func (q *ClaimQueues) Forget(hc *infrav1.HypervisorCluster) {
	q.set.Forget(clusterKey(hc))
	q.mu.Lock()
	delete(q.freeMemory, clusterKey(hc))
	delete(q.placements, clusterKey(hc))
	q.mu.Unlock()
	metrics.DeleteQueue(clusterKey(hc))
}

// acquireSlot asks for the slot op needs before the claim calls the hypervisor. It returns a
// non-zero result while the claim waits: a wait is not a failure, so nothing backs off, and the
// claim is woken when its turn comes (the requeue is only a safety net).
func (r *MachineClaimReconciler) acquireSlot(ctx context.Context, s *claimScope, op capacity.Operation) (ctrl.Result, error) {
	if r.Queues == nil || s.hc == nil {
		return ctrl.Result{}, nil
	}
	aq, err := r.Queues.queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait := aq.ThrottledFor(); wait > 0 {
		return r.throttled(s, wait)
	}
	req := slotRequest(s.claim, op)
	ok, woken := aq.Acquire(req)
	r.Queues.wake(clusterKey(s.hc), woken)
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
func (r *MachineClaimReconciler) throttled(s *claimScope, wait time.Duration) (ctrl.Result, error) {
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.HypervisorThrottledReason,
		fmt.Sprintf("HypervisorCluster %s refused work or timed out on a lock; all its claims wait %s", s.hc.Name, wait.Round(100*time.Millisecond)))
	return ctrl.Result{RequeueAfter: wait}, nil
}

// releaseSlot gives back the claim's slot at once, when its task is known to be over before the
// reconcile ends, and wakes the next claim in line.
func (r *MachineClaimReconciler) releaseSlot(s *claimScope) {
	if r.Queues == nil || s.hc == nil {
		return
	}
	if aq := r.Queues.set.Get(clusterKey(s.hc)); aq != nil {
		r.Queues.wake(clusterKey(s.hc), aq.Release(claimKey(s.claim)))
	}
}

// settleSlots runs after every reconcile: a claim holds a slot exactly while its recorded task
// needs one, so a finished, failed or forgotten task, a released claim or a failed call gives
// the slot back and wakes the next claim in line.
func (r *MachineClaimReconciler) settleSlots(s *claimScope) {
	if r.Queues == nil || s.hc == nil {
		return
	}
	aq := r.Queues.set.Get(clusterKey(s.hc))
	if aq == nil {
		return
	}
	key := claimKey(s.claim)
	op, needed := slotOperation(s.claim)
	released := !controllerutil.ContainsFinalizer(s.claim, infrav1.MachineClaimFinalizer)
	if released || s.claim.Status.Node == "" || s.claim.Status.CompletedStep == infrav1.StepStarted {
		r.Queues.mu.Lock()
		delete(r.Queues.placements[clusterKey(s.hc)], key)
		r.Queues.mu.Unlock()
	}
	switch {
	case released:
		r.Queues.wake(clusterKey(s.hc), aq.Release(key))
	case needed && aq.Holds(key, op):
	case needed:
		// A task this process did not start through the queue (a restart adopted it).
		aq.Hold(slotRequest(s.claim, op))
	case aq.Holds(key, capacity.OpClone) || aq.Holds(key, capacity.OpDelete):
		r.Queues.wake(clusterKey(s.hc), aq.Release(key))
	}
	r.Queues.record(clusterKey(s.hc), aq)
}

// DefaultCapacityRecheck is how long a claim waiting for capacity waits for a wake-up before it
// looks for room by itself.
const DefaultCapacityRecheck = 2 * time.Minute

func (r *MachineClaimReconciler) capacityRecheck() time.Duration {
	if r.CapacityRecheck > 0 {
		return r.CapacityRecheck
	}
	return DefaultCapacityRecheck
}

// awaitCapacityTurn keeps a claim behind the claims already waiting for capacity on its cluster,
// so the oldest, fair across pools, get the room that frees.
// fresh is true when the claim comes from the line: room freed since the shared node listing was
// made, so it must look at the hosts anew.
func (r *MachineClaimReconciler) awaitCapacityTurn(ctx context.Context, s *claimScope) (_ ctrl.Result, fresh bool, _ error) {
	if r.Queues == nil {
		return ctrl.Result{}, false, nil
	}
	aq, err := r.Queues.queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if may, waited := aq.MayPlaceAfterWait(slotRequest(s.claim, capacity.OpCapacity), r.capacityRecheck()); may {
		return ctrl.Result{}, waited, nil
	}
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.NoCapacityReason,
		fmt.Sprintf("waiting for capacity on HypervisorCluster %s, in line with %d other claim(s); woken when a VM of the cluster is removed", s.hc.Name, waitingForCapacity(aq)-1))
	r.Queues.record(clusterKey(s.hc), aq)
	return ctrl.Result{RequeueAfter: r.capacityRecheck()}, false, nil
}

// noCapacity puts a claim no host has room for in the capacity line. Waiting for room is not a
// failure: no backoff grows, and a VM of the cluster being removed wakes the next claim in line.
func (r *MachineClaimReconciler) noCapacity(ctx context.Context, s *claimScope, msg string) (ctrl.Result, error) {
	if r.Queues == nil {
		return r.retryLater(s, infrav1.NoCapacityReason, msg)
	}
	aq, err := r.Queues.queue(ctx, s.hc)
	if err != nil {
		return ctrl.Result{}, err
	}
	aq.NoCapacity(slotRequest(s.claim, capacity.OpCapacity))
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.NoCapacityReason, msg+"; waiting until a VM of the cluster is removed")
	r.Queues.record(clusterKey(s.hc), aq)
	return ctrl.Result{RequeueAfter: r.capacityRecheck()}, nil
}

// placed takes a claim that found room out of the capacity line; room may be left for the next.
// The room it took is remembered until the claim's VM runs.
func (r *MachineClaimReconciler) placed(s *claimScope, node string, memoryMiB int) {
	if r.Queues == nil {
		return
	}
	r.Queues.mu.Lock()
	if r.Queues.placements[clusterKey(s.hc)] == nil {
		r.Queues.placements[clusterKey(s.hc)] = map[string]promisedRoom{}
	}
	r.Queues.placements[clusterKey(s.hc)][claimKey(s.claim)] = promisedRoom{node: node, memoryMiB: memoryMiB}
	r.Queues.mu.Unlock()
	if aq := r.Queues.set.Get(clusterKey(s.hc)); aq != nil {
		r.Queues.wake(clusterKey(s.hc), aq.Placed(s.claim.Namespace+"/"+s.claim.Name))
	}
}

// capacityFreed tells the cluster's capacity line that a VM is gone.
func (q *ClaimQueues) capacityFreed(hc *infrav1.HypervisorCluster) {
	if q == nil {
		return
	}
	if aq := q.set.Get(clusterKey(hc)); aq != nil {
		q.wake(clusterKey(hc), aq.CapacityFreed(1))
	}
}

// observeFreeMemory wakes the next claim waiting for capacity when the cluster's hosts report more
// free memory than at the previous health check (a VM removed by hand, a host back online).
func (q *ClaimQueues) observeFreeMemory(hc *infrav1.HypervisorCluster, free uint64) {
	if q == nil {
		return
	}
	q.mu.Lock()
	prev, seen := q.freeMemory[clusterKey(hc)]
	q.freeMemory[clusterKey(hc)] = free
	q.mu.Unlock()
	if seen && free > prev {
		q.capacityFreed(hc)
	}
}

// freeMemory sums the free memory of the online nodes.
func freeMemory(nodes []hypervisor.Node) uint64 {
	var free uint64
	for _, n := range nodes {
		if n.Online {
			free += n.MemoryFree
		}
	}
	return free
}

// overloaded handles a lock timeout or a refused call: the whole cluster backs off once, with
// bounded exponential backoff and jitter, and the claim waits with the others. It is not the
// VM's failure, so the claim's own backoff does not grow.
func (r *MachineClaimReconciler) overloaded(ctx context.Context, s *claimScope, err error) (ctrl.Result, error) {
	aq, qerr := r.Queues.queue(ctx, s.hc)
	if qerr != nil {
		return ctrl.Result{}, qerr
	}
	wait := aq.Throttle()
	ctrl.LoggerFrom(ctx).Info("hypervisor overloaded; the cluster's queue backs off", "error", err.Error(), "wait", wait)
	return r.throttled(s, wait)
}

// awaitThrottle holds a claim's hypervisor calls while its cluster backs off.
func (r *MachineClaimReconciler) awaitThrottle(s *claimScope) (ctrl.Result, error) {
	if r.Queues == nil || s.hc == nil {
		return ctrl.Result{}, nil
	}
	if aq := r.Queues.set.Get(clusterKey(s.hc)); aq != nil {
		if wait := aq.ThrottledFor(); wait > 0 {
			return r.throttled(s, wait)
		}
	}
	return ctrl.Result{}, nil
}

// relieve records that the hypervisor took work again: its next overload backs off from the base.
func (r *MachineClaimReconciler) relieve(s *claimScope) {
	if r.Queues == nil || s.hc == nil {
		return
	}
	if aq := r.Queues.set.Get(clusterKey(s.hc)); aq != nil {
		aq.Relieve()
	}
}

func claimKey(c *infrav1.MachineClaim) string { return c.Namespace + "/" + c.Name }

// addPlacements adds to reserved the room promised to claims the cache does not show yet.
func (q *ClaimQueues) addPlacements(hc *infrav1.HypervisorCluster, self string, counted map[string]bool, reserved map[string]int) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, p := range q.placements[clusterKey(hc)] {
		if key != self && !counted[key] {
			reserved[p.node] += p.memoryMiB
		}
	}
}

func waitingForCapacity(aq *capacity.Queue) int {
	n := 0
	for _, k := range aq.Stats().WaitingForCapacity {
		n += k
	}
	return n
}
