package clusterruntime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

func cluster(name string) *infrav1.HypervisorCluster {
	return &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func claim(name, hc string, task *infrav1.TaskRef, deleting bool) *infrav1.MachineClaim {
	c := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{infrav1.HypervisorClusterNameLabel: hc}}}
	c.Status.Task, c.Status.Node = task, "pve1"
	if deleting {
		now := metav1.Now()
		c.DeletionTimestamp = &now
		c.Finalizers = []string{infrav1.MachineClaimFinalizer}
	}
	return c
}

// TestQueueStartsFromTheClaimsTasks: a new leader's first use of a cluster's queue holds the slots
// of the tasks its claims recorded, and only those: a clone, a deleting claim's destroy, not a
// live claim's stop nor another cluster's clone.
func TestQueueStartsFromTheClaimsTasks(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		claim("cloning", "pve", &infrav1.TaskRef{Operation: infrav1.TaskClone}, false),
		claim("destroying", "pve", &infrav1.TaskRef{Operation: infrav1.TaskDelete}, true),
		claim("stopping", "pve", &infrav1.TaskRef{Operation: infrav1.TaskStop}, false),
		claim("elsewhere", "other", &infrav1.TaskRef{Operation: infrav1.TaskClone}, false),
	).Build()
	rs := clusterruntime.New(c, nil)
	hc := cluster("pve")
	q, err := rs.For(hc).Queue(context.Background(), hc)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Holds("ns/cloning", capacity.OpClone) || !q.Holds("ns/destroying", capacity.OpDelete) {
		t.Errorf("in-flight clone and destroy not held: %+v", q.Stats())
	}
	if q.Holds("ns/stopping", capacity.OpDelete) || q.Holds("ns/elsewhere", capacity.OpClone) {
		t.Errorf("a live claim's stop or another cluster's clone holds a slot: %+v", q.Stats())
	}
	if again, _ := rs.For(hc).Queue(context.Background(), hc); again != q {
		t.Error("a second use built a second queue")
	}
}

// countingProvider counts node listings.
type countingProvider struct {
	hypervisor.Provider
	listings atomic.Int32
}

func (p *countingProvider) Nodes(context.Context) ([]hypervisor.Node, error) {
	p.listings.Add(1)
	return []hypervisor.Node{{Name: "pve1", Online: true, MemoryFree: 8 << 30}}, nil
}

// TestNodeListingIsSharedPerProvider: the health check's listing serves placement while it is
// fresh; a provider built anew (settings changed) lists afresh; a listing placement found wrong
// (forgotten with a zero time) is made again.
func TestNodeListingIsSharedPerProvider(t *testing.T) {
	ctx := context.Background()
	rt := clusterruntime.New(nil, nil).For(cluster("pve"))
	p := &countingProvider{}
	rt.PutNodes(p, []hypervisor.Node{{Name: "pve1"}}, time.Now())
	if nodes, _, err := rt.Nodes(ctx, p); err != nil || len(nodes) != 1 || p.listings.Load() != 0 {
		t.Fatalf("fresh listing not reused: %v %v, %d listings", nodes, err, p.listings.Load())
	}
	other := &countingProvider{}
	if _, _, err := rt.Nodes(ctx, other); err != nil || other.listings.Load() != 1 {
		t.Fatalf("a new provider reused another's listing: %v, %d listings", err, other.listings.Load())
	}
	rt.PutNodes(other, nil, time.Time{})
	if _, _, err := rt.Nodes(ctx, other); err != nil || other.listings.Load() != 2 {
		t.Fatalf("a forgotten listing was reused: %v, %d listings", err, other.listings.Load())
	}
	rt.PutNodes(p, nil, time.Now().Add(-clusterruntime.NodeListingMaxAge-time.Second))
	if _, _, err := rt.Nodes(ctx, p); err != nil || p.listings.Load() != 1 {
		t.Fatalf("a stale listing was reused: %v, %d listings", err, p.listings.Load())
	}
}

// TestPromisedRoomCountsUntilTheCacheShowsIt: room promised to a placed claim is added to the
// reservations of the others until the claim is counted from the cache or unpromised; forgetting
// the cluster forgets it.
func TestPromisedRoomCountsUntilTheCacheShowsIt(t *testing.T) {
	rs := clusterruntime.New(nil, nil)
	hc := cluster("pve")
	placed := claim("a", "pve", nil, false)
	rs.For(hc).Promise(placed, "pve1", 2048)

	reserved := map[string]int{}
	rs.For(hc).AddPromised("ns/b", map[string]bool{}, reserved)
	if reserved["pve1"] != 2048 {
		t.Errorf("promised room not counted for another claim: %v", reserved)
	}
	reserved = map[string]int{}
	rs.For(hc).AddPromised("ns/a", map[string]bool{}, reserved)
	if len(reserved) != 0 {
		t.Errorf("a claim counts its own promise: %v", reserved)
	}
	reserved = map[string]int{}
	rs.For(hc).AddPromised("ns/b", map[string]bool{"ns/a": true}, reserved)
	if len(reserved) != 0 {
		t.Errorf("room counted twice once the cache shows the claim: %v", reserved)
	}

	rs.Forget(hc)
	reserved = map[string]int{}
	rs.For(hc).AddPromised("ns/b", map[string]bool{}, reserved)
	if len(reserved) != 0 {
		t.Errorf("a forgotten cluster kept its promises: %v", reserved)
	}
	rs.For(hc).Promise(placed, "pve1", 2048)
	rs.For(hc).Unpromise(placed)
	rs.For(hc).AddPromised("ns/b", map[string]bool{}, reserved)
	if len(reserved) != 0 {
		t.Errorf("an unpromised claim still counts: %v", reserved)
	}
}

// TestMoreFreeMemoryWakesTheNextClaim: a health check that finds more free memory than the last
// wakes the first claim waiting for capacity; the same or less wakes nobody.
func TestMoreFreeMemoryWakesTheNextClaim(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rs := clusterruntime.New(fake.NewClientBuilder().WithScheme(scheme).Build(), nil)
	hc := cluster("pve")
	rt := rs.For(hc)
	q, err := rt.Queue(context.Background(), hc)
	if err != nil {
		t.Fatal(err)
	}
	waiting := claim("waiting", "pve", nil, false)
	q.NoCapacity(clusterruntime.SlotRequest(waiting, capacity.OpCapacity))

	node := func(free uint64) []hypervisor.Node {
		return []hypervisor.Node{{Name: "pve1", Online: true, MemoryFree: free}, {Name: "pve2", Online: false, MemoryFree: 64 << 30}}
	}
	rt.ObserveFreeMemory(node(4 << 30))
	rt.ObserveFreeMemory(node(4 << 30))
	rt.ObserveFreeMemory(node(2 << 30))
	select {
	case ev := <-rs.ClaimWakeups():
		t.Fatalf("woken without memory freed: %s", ev.Object.Name)
	default:
	}
	rt.ObserveFreeMemory(node(6 << 30))
	select {
	case ev := <-rs.ClaimWakeups():
		if ev.Object.Name != "waiting" {
			t.Errorf("woke %s", ev.Object.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("more free memory woke nobody")
	}
}
