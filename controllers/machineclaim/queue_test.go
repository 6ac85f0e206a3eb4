package machineclaim_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// labelledClaims creates n standalone claims of pool on HypervisorCluster hc, one at a time so their
// ages differ, and returns them.
func labelledClaims(t *testing.T, ns, hc, pool string, n int, memoryMiB int32) []*infrav1.MachineClaim {
	t.Helper()
	var out []*infrav1.MachineClaim
	for i := range n {
		c := builder.NewMachineClaim(fmt.Sprintf("%s-%d", pool, i), ns).WithHypervisorCluster(hc).
			WithLabels(map[string]string{fleetv1.RunnerPoolNameLabel: pool}).Build()
		c.Spec.MemoryMiB = memoryMiB
		NewWithT(t).Expect(env.Client.Create(context.Background(), c)).To(Succeed())
		out = append(out, c)
		time.Sleep(1100 * time.Millisecond / time.Duration(max(n, 1))) // creation timestamps have one-second resolution
	}
	return out
}

// claimWatch samples the claims of a namespace while a test runs: the most clones in flight at
// once per node, the order clones started in, and every VMProvisioned reason seen.
type claimWatch struct {
	mu          sync.Mutex
	maxClones   map[string]int
	cloneOrder  []string
	reasons     map[string]bool
	cloneStarts map[string]bool
}

func watchClaims(t *testing.T, ns string) *claimWatch {
	w := &claimWatch{maxClones: map[string]int{}, reasons: map[string]bool{}, cloneStarts: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			claims := &infrav1.MachineClaimList{}
			if err := env.Client.List(ctx, claims, client.InNamespace(ns)); err == nil {
				w.sample(claims.Items)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return w
}

func (w *claimWatch) sample(claims []infrav1.MachineClaim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	perNode := map[string]int{}
	slices.SortFunc(claims, func(a, b infrav1.MachineClaim) int {
		if a.Status.Task == nil || b.Status.Task == nil {
			return 0
		}
		return a.Status.Task.StartTime.Compare(b.Status.Task.StartTime.Time)
	})
	for _, c := range claims {
		if t := c.Status.Task; t != nil && t.Operation == "Clone" {
			perNode[c.Status.Node]++
			if !w.cloneStarts[c.Name] {
				w.cloneStarts[c.Name] = true
				w.cloneOrder = append(w.cloneOrder, c.Name)
			}
		}
		if cond := conditions.Get(&c, infrav1.MachineClaimVMProvisionedCondition); cond != nil {
			w.reasons[cond.Reason] = true
		}
	}
	for n, k := range perNode {
		w.maxClones[n] = max(w.maxClones[n], k)
	}
}

func (w *claimWatch) snapshot() (maxClones map[string]int, order []string, reasons map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps(w.maxClones), slices.Clone(w.cloneOrder), maps(w.reasons)
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// slowCloneModel is the load model with clones long enough to overlap and PVE's storage lock.
func slowCloneModel() pvesim.LoadModel {
	m := pvesim.DefaultLoadModel()
	m.LinkedCloneTime = 8 * time.Second // 800ms at the model's time scale
	m.Jitter = 0
	return m
}

// TestClonesWaitForASlotFairlyAcrossPools: with one clone per storage allowed, six claims of two
// pools clone one at a time (none waits for Proxmox's storage lock), the others say
// WaitingForSlot, and the pools take turns: the younger pool is not made to wait behind every
// claim of the older one. Every claim still gets exactly one VM.
func TestClonesWaitForASlotFairlyAcrossPools(t *testing.T) {
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{Load: slowCloneModel()})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		hc.Spec.Limits = infrav1.HypervisorClusterLimits{ClonesPerHost: 1, TasksPerStorage: 1, DeletesPerHost: 4}
	})
	w := watchClaims(t, ns)
	claims := append(labelledClaims(t, ns, "pve", "a", 3, 0), labelledClaims(t, ns, "pve", "b", 3, 0)...)
	expectOneVMPerClaim(t, sim, claims, 60*time.Second)

	maxClones, order, reasons := w.snapshot()
	t.Logf("clone order %v, claims showing a clone task at once per node %v, load %+v", order, maxClones, sim.LoadStats())
	g.Expect(reasons).To(HaveKey(infrav1.WaitingForSlotReason))
	// One clone at a time on the storage: the simulator's lock serves one, so a second clone sent
	// while the first ran would have waited for it. (A claim's status still names its clone task
	// while it configures the VM after the clone ended, when its slot is already the next
	// claim's, so two claims may show a clone task at once.)
	g.Expect(sim.LoadStats().LockWaits).To(BeZero(), "no clone waited for Proxmox's storage lock")
	g.Expect(order).To(HaveLen(6))
	// Pool b's first claim starts among the first three clones, not after all of pool a.
	g.Expect(slices.Index(order, "b-0")).To(BeNumerically("<=", 2), "order %v", order)
	// Within a pool, oldest first.
	g.Expect(slices.Index(order, "a-1")).To(BeNumerically("<", slices.Index(order, "a-2")), "order %v", order)
	g.Expect(slices.Index(order, "b-1")).To(BeNumerically("<", slices.Index(order, "b-2")), "order %v", order)
}

// TestLockTimeoutsSlowTheClusterNotTheClaims: Proxmox answers some clones with its lock-timeout
// error. The cluster's queue backs off (HypervisorThrottled), no claim counts a provisioning
// failure, every claim gets one VM, and clones are retried about once per timeout, not in a
// storm.
func TestLockTimeoutsSlowTheClusterNotTheClaims(t *testing.T) {
	g := NewWithT(t)
	m := slowCloneModel()
	m.LockTimeout = 10 * time.Second // 1s: two clones per storage fit, a third would not
	sim := pvesim.StartForTest(t, pvesim.Config{Load: m})
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 3,
		TaskExitStatus: "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"})
	startManager(t)
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve-locks", sim)
	w := watchClaims(t, ns)
	claims := labelledClaims(t, ns, hc.Name, "a", 6, 0)
	expectOneVMPerClaim(t, sim, claims, 60*time.Second)

	_, _, reasons := w.snapshot()
	stats := sim.LoadStats()
	clones := sim.Requests()["POST /nodes/{node}/qemu/{vmid}/clone"]
	t.Logf("clone requests %d for %d claims with 3 lock timeouts injected; load %+v", clones, len(claims), stats)
	g.Expect(reasons).To(HaveKey(infrav1.HypervisorThrottledReason))
	g.Expect(stats.LockTimeouts).To(BeZero(), "the default limits keep clones within the storage lock's timeout")
	g.Expect(clones).To(BeNumerically("<=", len(claims)+3))
	for _, reason := range []string{infrav1.HypervisorErrorReason, infrav1.ProvisioningFailedReason} {
		g.Expect(testutil.ToFloat64(metrics.VMProvisioningTotal.WithLabelValues(hc.Name, "failure", reason))).To(BeZero(),
			"a lock timeout is not the VM's failure")
	}
}

// smallCluster is one node with room for four 2 GiB VMs, holding the runner template.
func smallCluster() *pvesim.Inventory {
	inv := pvesim.DefaultInventory()
	inv.Nodes = []pvesim.NodeSpec{{Name: "pve1", CPUs: 16, MemoryMiB: 10240, BaseMemoryUsedMiB: 1024}}
	inv.VMs = []pvesim.VMSpec{pvesim.RunnerTemplate(9000, "pve1", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu")}
	return inv
}

// TestClaimsWaitingForCapacityStartWhenAVMGoes: ten claims of two pools on a cluster with memory
// for four. Six wait for capacity (NoCapacity, no failure counted). The fallback recheck is ten
// minutes, so only a wake-up can start a waiting claim within the test: each VM that powers off
// and is removed starts the next waiting claim promptly, the pools take turns, and within a
// pool the oldest goes first. RunnerPool a's status counts its runners that wait, then none.
func TestClaimsWaitingForCapacityStartWhenAVMGoes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: smallCluster()})
	startManagerWith(t, nil, testTiming{Sweep: time.Second, OrphanGrace: 2 * time.Second, CapacityRecheck: 10 * time.Minute})
	ns := newNamespace(t)
	capiFleet(t, ns, sim)
	// RunnerPool a has no runners of its own (replicas 0): its status counts the claims labelled
	// with its name that wait for capacity.
	runnerTemplates(t, ns)
	poolA := builder.NewRunnerPool("a", ns).WithCluster("fleet").WithBounds(0, 5).WithReplicas(0).WithTemplates("runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, poolA)).To(Succeed())
	// Pools a and b alternate, a second apart, so every claim has its own age.
	var claims []*infrav1.MachineClaim
	for i := range 10 {
		pool := []string{"a", "b"}[i%2]
		c := builder.NewMachineClaim(fmt.Sprintf("%s-%d", pool, i/2), ns).WithHypervisorCluster("pve").
			WithLabels(map[string]string{fleetv1.RunnerPoolNameLabel: pool}).Build()
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		claims = append(claims, c)
		if i < 4 {
			// The first four take the room, one after the other.
			g.Eventually(func(g Gomega) {
				got := get(g, c)
				g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%s: %+v", c.Name, got.Status.Conditions)
			},
				20*time.Second, 50*time.Millisecond).Should(Succeed())
		}
		// Placement counts a VM that started within a second of the node listing as not yet
		// listed (condition times have whole seconds): keep the starts apart.
		time.Sleep(1500 * time.Millisecond)
	}
	phases := func(g Gomega) (ready, waiting []string) {
		for _, c := range claims {
			got := &infrav1.MachineClaim{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
				continue
			}
			if got.Status.Phase == infrav1.MachineClaimPhaseReady {
				ready = append(ready, got.Name)
			} else if cond := conditions.Get(got, infrav1.MachineClaimVMProvisionedCondition); cond != nil && cond.Reason == infrav1.NoCapacityReason {
				waiting = append(waiting, got.Name)
				g.Expect(got.Status.FailureCount).To(BeZero(), "waiting for capacity is no failure")
			}
		}
		return ready, waiting
	}
	g.Eventually(func(g Gomega) {
		ready, waiting := phases(g)
		g.Expect(ready).To(ConsistOf("a-0", "b-0", "a-1", "b-1"))
		g.Expect(waiting).To(ConsistOf("a-2", "b-2", "a-3", "b-3", "a-4", "b-4"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	// The pool says how many of its runners wait, and where; its Ready does not call it scaled.
	g.Eventually(func(g Gomega) {
		got := get(g, poolA)
		g.Expect(got.Status.WaitingForCapacity).To(Equal([]fleetv1.CapacityWait{{Cluster: "pve", Count: 3}}))
		ready := conditions.Get(got, fleetv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1.WaitingForCapacityReason))
		g.Expect(ready.Message).To(ContainSubstring("3 waiting for capacity (3 on HypervisorCluster pve)"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// Runners finish one by one: each VM powers itself off, the sweep removes it, and the next
	// waiting claim starts: a-2 is the oldest waiting, then the pools take turns.
	started := []string{}
	for _, done := range []string{"a-0", "b-0", "a-1", "b-1", "a-2", "b-2"} {
		c := &infrav1.MachineClaim{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: done}, c)).To(Succeed())
		before, _ := phases(g)
		g.Expect(sim.PowerOff(vmidOf(c.Status.VMID))).To(Succeed())
		var next string
		g.Eventually(func(g Gomega) {
			ready, _ := phases(g)
			var fresh []string
			for _, r := range ready {
				if !slices.Contains(before, r) {
					fresh = append(fresh, r)
				}
			}
			g.Expect(fresh).To(HaveLen(1), "one waiting claim starts in the room of %s", done)
			next = fresh[0]
		}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
		started = append(started, next)
	}
	t.Logf("started as VMs went: %v", started)
	g.Expect(started).To(Equal([]string{"a-2", "b-2", "a-3", "b-3", "a-4", "b-4"}))
	_, waiting := phases(g)
	g.Expect(waiting).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		got := get(g, poolA)
		g.Expect(got.Status.WaitingForCapacity).To(BeEmpty())
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).NotTo(Equal(fleetv1.WaitingForCapacityReason))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
