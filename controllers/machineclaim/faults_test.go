package machineclaim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/luthermonson/go-proxmox"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// createClaims creates n standalone claims on HypervisorCluster "pve" and returns them.
func createClaims(t *testing.T, ns string, n int) []*infrav1.MachineClaim {
	t.Helper()
	claims := make([]*infrav1.MachineClaim, n)
	for i := range claims {
		claims[i] = builder.NewMachineClaim(fmt.Sprintf("vm-%02d", i), ns).WithHypervisorCluster("pve").Build()
		NewWithT(t).Expect(env.Client.Create(context.Background(), claims[i])).To(Succeed())
	}
	return claims
}

// expectOneVMPerClaim checks that every claim is Ready on its own VM and no other owned VM exists.
func expectOneVMPerClaim(t *testing.T, sim *pvesim.Simulator, claims []*infrav1.MachineClaim, timeout time.Duration) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		for _, c := range claims {
			got := get(g, c)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%s: %+v", c.Name, got.Status.Conditions)
		}
	}, timeout, 200*time.Millisecond).Should(Succeed())
	vmids := map[int]string{}
	for _, c := range claims {
		got := get(g, c)
		id := vmidOf(got.Status.VMID)
		g.Expect(vmids).NotTo(HaveKey(id), "claims %s and %s share VM %d", vmids[id], c.Name, id)
		vmids[id] = c.Name
		vm, ok := sim.VM(id)
		g.Expect(ok).To(BeTrue(), "VM %d of %s exists", id, c.Name)
		g.Expect(vm.Status).To(Equal("running"))
		g.Expect(vm.Tags).To(ContainElement("hf-id-" + got.Spec.ClaimID))
	}
	g.Expect(ownedVMs(sim)).To(HaveLen(len(claims)), "no duplicate or leaked VM")
}

// TestBurstOfClaimsGetsOneVMEach creates claims at once, so VMID proposals and node choices race.
func TestBurstOfClaimsGetsOneVMEach(t *testing.T) {
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		// A narrow range forces VMID collisions between concurrent claims.
		hc.Spec.Proxmox.VMIDRange = &infrav1.VMIDRange{Start: 1000, End: 1015}
	})
	claims := createClaims(t, ns, 12)
	expectOneVMPerClaim(t, sim, claims, 60*time.Second)
}

// TestFaultsEventuallySucceed injects the failures Proxmox users meet — lock contention, gateway
// timeouts, failing tasks, slow answers — and expects every claim to end with exactly one VM.
func TestFaultsEventuallySucceed(t *testing.T) {
	sim := pvesim.StartForTest(t, pvesim.Config{Seed: 7})
	for _, f := range []pvesim.Fault{
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 2, Status: 500, Message: "VM is locked (clone)"},
		{Endpoint: "PUT /nodes/{node}/qemu/{vmid}/config", Count: 2, Status: 596, Message: "Connection timed out"},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/status/start", Count: 1, TaskExitStatus: "start failed: QEMU exited with code 1"},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, TaskExitStatus: "clone failed: storage full"},
		{Endpoint: "GET /cluster/nextid", Rate: 0.5, Latency: 150 * time.Millisecond},
		{Endpoint: "GET /nodes/{node}/qemu/{vmid}/status/current", Count: 2, Status: 500, Message: "got timeout"},
	} {
		sim.InjectFault(f)
	}
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claims := createClaims(t, ns, 4)
	// Backoff after a failure starts at 5s, so allow for a few rounds of it.
	expectOneVMPerClaim(t, sim, claims, 90*time.Second)
	// Backoff holds whatever wakes the controller: a failure's own status update once retried at
	// once, hundreds of times a minute.
	clones := sim.Requests()["POST /nodes/{node}/qemu/{vmid}/clone"]
	t.Logf("clone requests for %d claims with 3 injected clone failures: %d", len(claims), clones)
	NewWithT(t).Expect(clones).To(BeNumerically("<=", len(claims)+3+3))
}

// TestManagerRestartMidClone stops the manager while a clone runs and starts a new one: the new
// manager resumes polling the recorded task and ends with exactly one VM.
func TestManagerRestartMidClone(t *testing.T) {
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", TaskDuration: 3 * time.Second})
	stop := startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claims := createClaims(t, ns, 1)
	g.Eventually(func(g Gomega) {
		task := get(g, claims[0]).Status.Task
		g.Expect(task).NotTo(BeNil())
		g.Expect(task.Operation).To(Equal("Clone"))
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	stop()
	t.Logf("manager stopped with clone task %s in flight", get(g, claims[0]).Status.Task.ID)
	startManager(t)
	expectOneVMPerClaim(t, sim, claims, 30*time.Second)
}

// TestFailedStartIsReportedAndRetried: a healthy start is proved by the guest agent's addresses and
// its task never read, so a failed start must still be noticed (by reading the task while the
// addresses are missing), reported, and retried.
func TestFailedStartIsReportedAndRetried(t *testing.T) {
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	const startFailure = "start failed: QEMU exited with code 1"
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/status/start", Count: 1, TaskExitStatus: startFailure})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claims := createClaims(t, ns, 1)
	expectOneVMPerClaim(t, sim, claims, 60*time.Second)
	g.Expect(sim.Requests()["POST /nodes/{node}/qemu/{vmid}/status/start"]).To(Equal(2), "one failed start, one retry")
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(env.Client.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var warnings []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == claims[0].Name && e.Type == corev1.EventTypeWarning {
				warnings = append(warnings, e.Message)
			}
		}
		g.Expect(warnings).To(ContainElement(ContainSubstring(startFailure)))
	}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestHungTaskDoesNotBlockDeletion: the stop task of a deleting claim never ends (a hung node).
// Past the task deadline the claim says so, looks at the VM again and stops and destroys it anew;
// it is released only once the VM is gone, so nothing leaks.
func TestHungTaskDoesNotBlockDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: time.Second, OrphanGrace: time.Minute, TaskDeadline: 2 * time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claims := createClaims(t, ns, 1)
	expectOneVMPerClaim(t, sim, claims, 60*time.Second)
	claim := get(g, claims[0])
	vmid := vmidOf(claim.Status.VMID)

	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/status/stop", Count: 1, TaskDuration: time.Hour})
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the hung stop task does not hold the claim")
	_, exists := sim.VM(vmid)
	g.Expect(exists).To(BeFalse(), "the VM is destroyed before the claim is released")
	g.Expect(sim.Requests()["POST /nodes/{node}/qemu/{vmid}/status/stop"]).To(BeNumerically(">=", 2), "the stop was issued anew")
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == claim.Name && e.Type == corev1.EventTypeWarning {
			reasons = append(reasons, e.Reason+": "+e.Message)
		}
	}
	g.Expect(reasons).To(ContainElement(ContainSubstring(infrav1.TaskTimedOutReason + ": Stop task")))
}

// TestVMIDTakenOnAnotherNodeIsGivenBack: a claim reserves a VMID, waits for a clone slot, and
// meanwhile someone clones a VM onto that VMID on another node. PVE accepts the claim's clone and
// fails its task ("File exists"); the claim must propose another VMID instead of retrying the
// taken one for ever, and leave the other VM alone.
func TestVMIDTakenOnAnotherNodeIsGivenBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	// The first clone holds the only slot long enough for the test to take the second claim's VMID.
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, TaskDuration: 4 * time.Second})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		hc.Spec.Limits = infrav1.HypervisorClusterLimits{ClonesPerHost: 1, TasksPerStorage: 1, DeletesPerHost: 4}
	})
	claims := createClaims(t, ns, 2)
	var waiting *infrav1.MachineClaim
	g.Eventually(func(g Gomega) {
		for _, c := range claims {
			got := get(g, c)
			if got.Status.VMID != "" && got.Status.Task == nil && conditions.GetReason(got, infrav1.MachineClaimVMProvisionedCondition) == infrav1.WaitingForSlotReason {
				waiting = got
			}
		}
		g.Expect(waiting).NotTo(BeNil(), "one claim has a VMID and waits for the slot")
	}, 20*time.Second, 20*time.Millisecond).Should(Succeed())
	taken := vmidOf(waiting.Status.VMID)
	// Someone else's VM on another node, with the reserved VMID: a clone of that node's template.
	other, template := "pve2", 9001
	if waiting.Status.Node == other {
		other, template = "pve1", 9000
	}
	node, err := sim.PersonClient().Node(ctx, other)
	g.Expect(err).NotTo(HaveOccurred())
	src, err := node.VirtualMachine(ctx, template)
	g.Expect(err).NotTo(HaveOccurred())
	_, task, err := src.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: taken, Name: "theirs"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.WaitFor(ctx, 10)).To(Succeed())
	g.Expect(task.ExitStatus).To(Equal("OK"), "their clone took VMID %d before the claim's clone", taken)
	theirs, ok := sim.VM(taken)
	g.Expect(ok).To(BeTrue())

	expectOneVMPerClaim(t, sim, claims, 60*time.Second)
	g.Expect(vmidOf(get(g, waiting).Status.VMID)).NotTo(Equal(taken), "another VMID was proposed")
	now, ok := sim.VM(taken)
	g.Expect(ok).To(BeTrue())
	g.Expect(now.Node).To(Equal(theirs.Node))
	g.Expect(now.Name).To(Equal("theirs"), "their VM is left alone")
}
