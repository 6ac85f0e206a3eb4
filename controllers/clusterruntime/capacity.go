package clusterruntime

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

type promisedRoom struct {
	node      string
	memoryMiB int
	// storage ("namespace/name" of a VMStorage) and storageBytes are the disks promised there.
	storage      string
	storageBytes int64
}

func limitsOf(hc *infrav1.HypervisorCluster) capacity.Limits {
	l := hc.Spec.Limits
	return capacity.Limits{ClonesPerHost: int(l.ClonesPerHost), TasksPerStorage: int(l.TasksPerStorage), DeletesPerHost: int(l.DeletesPerHost)}
}

// Queue returns the cluster's capacity queue (pkg/capacity) with hc's spec.limits. Its first use
// records the tasks the cluster's claims have in flight, so a new leader keeps their slots.
func (rt *Runtime) Queue(ctx context.Context, hc *infrav1.HypervisorCluster) (*capacity.Queue, error) {
	rt.queueMu.Lock()
	defer rt.queueMu.Unlock()
	limits := limitsOf(hc)
	if rt.queue != nil {
		if rt.queue.Limits() != limits {
			rt.Wake(rt.queue.SetLimits(limits))
		}
		return rt.queue, nil
	}
	q := capacity.NewQueue(limits)
	claims := &infrav1.MachineClaimList{}
	if err := rt.rs.client.List(ctx, claims, client.InNamespace(rt.namespace),
		client.MatchingLabels{infrav1.HypervisorClusterNameLabel: rt.name}); err != nil {
		return nil, fmt.Errorf("listing the claims of %s: %w", rt.key, err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if op, ok := SlotOperation(c); ok {
			q.Hold(SlotRequest(c, op))
		}
	}
	rt.queue = q
	return q, nil
}

// ExistingQueue is the cluster's capacity queue, nil before its first use.
func (rt *Runtime) ExistingQueue() *capacity.Queue {
	rt.queueMu.Lock()
	defer rt.queueMu.Unlock()
	return rt.queue
}

// SlotOperation is the slot a claim's recorded task holds, if any.
func SlotOperation(c *infrav1.MachineClaim) (capacity.Operation, bool) {
	if t := c.Status.Task; t != nil {
		switch t.Operation {
		case infrav1.TaskClone:
			return capacity.OpClone, true
		case infrav1.TaskStop, infrav1.TaskDelete:
			if !c.DeletionTimestamp.IsZero() {
				return capacity.OpDelete, true
			}
		}
	}
	return "", false
}

// SlotRequest is c asking for a slot for op: fair across its pool (a RunnerPool's runners, or a
// VMPool's VMs, share one turn; a standalone claim takes its namespace's), oldest claim first.
func SlotRequest(c *infrav1.MachineClaim, op capacity.Operation) capacity.Request {
	pool := "namespace/" + c.Namespace
	if p := c.Labels[fleetv1.RunnerPoolNameLabel]; p != "" {
		pool = "runnerpool/" + c.Namespace + "/" + p
	} else if p := c.Labels[fleetv1.VMPoolNameLabel]; p != "" {
		pool = "vmpool/" + c.Namespace + "/" + p
	}
	r := capacity.Request{Key: ClaimKey(c), Pool: pool, Op: op, Host: c.Status.Node, Created: c.CreationTimestamp.Time}
	if op == capacity.OpClone || op == capacity.OpDelete {
		r.Storage = vmStorage(c)
	}
	return r
}

// ClaimKey is the key of c in its cluster's queue and promises.
func ClaimKey(c *infrav1.MachineClaim) string { return c.Namespace + "/" + c.Name }

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

// Wake reconciles the claims whose turn came and records how long they waited.
func (rt *Runtime) Wake(grants []capacity.Grant) {
	for _, g := range grants {
		metrics.ObserveQueueWait(rt.key, string(g.Op), g.Waited)
		ns, name, _ := strings.Cut(g.Key, "/")
		ev := event.TypedGenericEvent[*infrav1.MachineClaim]{Object: &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
		select {
		case rt.rs.wakeups <- ev:
		default:
			// The controller is behind: never block a reconcile on it.
			go func() { rt.rs.wakeups <- ev }()
		}
	}
}

// Record publishes the cluster's queue metrics.
func (rt *Runtime) Record(q *capacity.Queue) {
	st := q.Stats()
	waitingCapacity := 0
	for _, n := range st.WaitingForCapacity {
		waitingCapacity += n
	}
	metrics.SetQueue(rt.key,
		map[string]int{"clone": st.Waiting[capacity.OpClone], "delete": st.Waiting[capacity.OpDelete], "capacity": waitingCapacity},
		map[string]int{"clone": st.InFlight[capacity.OpClone], "delete": st.InFlight[capacity.OpDelete]})
}

// WaitingForCapacity counts the claims in the cluster's capacity line.
func WaitingForCapacity(q *capacity.Queue) int {
	n := 0
	for _, k := range q.Stats().WaitingForCapacity {
		n += k
	}
	return n
}

// Promise remembers the room a claim that found a host took, until the claim's VM runs (Unpromise),
// and takes the claim out of the capacity line; room may be left for the next.
func (rt *Runtime) Promise(c *infrav1.MachineClaim, node string, memoryMiB int) {
	rt.mu.Lock()
	rt.promised[ClaimKey(c)] = promisedRoom{node: node, memoryMiB: memoryMiB}
	rt.mu.Unlock()
	if q := rt.ExistingQueue(); q != nil {
		rt.Wake(q.Placed(ClaimKey(c)))
	}
}

// PromiseStorage remembers that c's disks (bytes) go to the VMStorage storage on node, beside the
// memory Promise remembers, until the claim's VM runs.
func (rt *Runtime) PromiseStorage(c *infrav1.MachineClaim, storage, node string, bytes int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	p := rt.promised[ClaimKey(c)]
	p.node, p.storage, p.storageBytes = node, storage, bytes
	rt.promised[ClaimKey(c)] = p
}

// AddPromisedStorage adds to pending (bytes by node; "" for a shared storage) the disks promised
// on storage to claims other than self that counted (the claims in the cache that show their
// storage) does not hold.
func (rt *Runtime) AddPromisedStorage(self, storage string, shared bool, counted map[string]bool, pending map[string]int64) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for key, p := range rt.promised {
		if key == self || counted[key] || p.storage != storage {
			continue
		}
		node := p.node
		if shared {
			node = ""
		}
		pending[node] += p.storageBytes
	}
}

// Unpromise forgets the room promised to c: its VM runs, it has no host yet, or it is released.
func (rt *Runtime) Unpromise(c *infrav1.MachineClaim) {
	rt.mu.Lock()
	delete(rt.promised, ClaimKey(c))
	rt.mu.Unlock()
}

// AddPromised adds to reserved (MiB by node) the room promised to claims other than self that
// counted (the claims in the cache) does not hold.
func (rt *Runtime) AddPromised(self string, counted map[string]bool, reserved map[string]int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for key, p := range rt.promised {
		if key != self && !counted[key] {
			reserved[p.node] += p.memoryMiB
		}
	}
}

// CapacityFreed tells the cluster's capacity line that a VM is gone.
func (rt *Runtime) CapacityFreed() {
	if q := rt.ExistingQueue(); q != nil {
		rt.Wake(q.CapacityFreed(1))
	}
}

// ObserveFreeMemory wakes the next claim waiting for capacity when the hosts report more free
// memory than at the previous health check (a VM removed by hand, a host back online).
func (rt *Runtime) ObserveFreeMemory(nodes []hypervisor.Node) {
	var free uint64
	for _, n := range nodes {
		if n.Online {
			free += n.MemoryFree
		}
	}
	rt.mu.Lock()
	prev, seen := rt.freeMemory, rt.freeMemorySeen
	rt.freeMemory, rt.freeMemorySeen = free, true
	rt.mu.Unlock()
	if seen && free > prev {
		rt.CapacityFreed()
	}
}
