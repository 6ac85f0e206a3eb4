package machineclaim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// runnerCopies is the default inventory with a second copy of the runner template on pve3: the same
// name and tags as 9000 on pve1, as clusters with local storage keep one per node.
func runnerCopies(extra ...pvesim.VMSpec) *pvesim.Inventory {
	inv := pvesim.DefaultInventory()
	inv.VMs = append(inv.VMs, pvesim.RunnerTemplate(9100, "pve3", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu"))
	inv.VMs = append(inv.VMs, extra...)
	return inv
}

// templateOfNode is the copy of the runner template on each node of runnerCopies.
var templateOfNode = map[string]int{"pve1": 9000, "pve3": 9100}

// expectClonedFromOwnNode checks that a Ready claim's VM is a linked clone of the copy on its node,
// and that the claim recorded that copy.
func expectClonedFromOwnNode(g Gomega, sim *pvesim.Simulator, claim *infrav1.MachineClaim) {
	got := get(g, claim)
	g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%s: %+v", got.Name, got.Status.Conditions)
	tmpl := templateOfNode[got.Status.Node]
	g.Expect(tmpl).NotTo(BeZero(), "%s was placed on %s, which holds no copy", got.Name, got.Status.Node)
	g.Expect(got.Status.SourceTemplate).To(Equal(&infrav1.TemplateRef{Node: got.Status.Node, ID: idOf(tmpl)}))
	vm, ok := sim.VM(vmidOf(got.Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Node).To(Equal(got.Status.Node))
	g.Expect(vm.Disks["scsi0"]).To(HavePrefix(fmt.Sprintf("local-lvm:base-%d-disk-0/vm-%s-disk-0,", tmpl, got.Status.VMID)))
}

// TestLinkedClonesSpreadOverTemplateCopies keeps the runner template on two nodes: claims selecting
// it by name are placed on both, each a linked clone of its own node's copy, and the
// MachineClaimTemplate reports both copies. Two copies on one node are refused with a readable
// condition and no VM.
func TestLinkedClonesSpreadOverTemplateCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: runnerCopies()})
	dupSim := pvesim.StartForTest(t, pvesim.Config{Inventory: runnerCopies(
		pvesim.RunnerTemplate(9101, "pve1", "ubuntu-2404-runner", "32G", "runner"))})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	proxmoxCluster(t, ns, "pve-dup", dupSim)

	// pve1 and pve3 have the same free memory: the first claim takes pve1, and the memory it
	// reserves sends the second to pve3.
	first := builder.NewMachineClaim("spread-a", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, first).Status.SourceTemplate).NotTo(BeNil())
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	second := builder.NewMachineClaim("spread-b", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())

	g.Eventually(func(g Gomega) {
		expectClonedFromOwnNode(g, sim, first)
		expectClonedFromOwnNode(g, sim, second)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect([]string{get(g, first).Status.Node, get(g, second).Status.Node}).To(ConsistOf("pve1", "pve3"))

	tmpl := builder.NewMachineClaimTemplate("runner", ns).WithSpec(infrav1.MachineClaimSpec{
		HypervisorClusterName: "pve", Template: infrav1.TemplateSource{Name: "ubuntu-2404-runner", Tags: []string{"runner"}}}).Build()
	dupTmpl := builder.NewMachineClaimTemplate("runner-dup", ns).WithSpec(infrav1.MachineClaimSpec{
		HypervisorClusterName: "pve-dup", Template: infrav1.TemplateSource{Name: "ubuntu-2404-runner"}}).Build()
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	g.Expect(env.Client.Create(ctx, dupTmpl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, tmpl)
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(got.Status.ResolvedTemplate).To(Equal("pve:pve1/9000+pve3/9100"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// Two copies on pve1: which one would a linked clone there use? Refused, and said so.
	dup := builder.NewMachineClaim("dup", ns).WithHypervisorCluster("pve-dup").WithTemplateName("ubuntu-2404-runner").Build()
	g.Expect(env.Client.Create(ctx, dup)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, dup)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseFailed))
		c := conditions.Get(got, infrav1.MachineClaimVMProvisionedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.TemplateAmbiguousReason))
		g.Expect(c.Message).To(ContainSubstring("2 templates match on node pve1: pve1/9000, pve1/9101"))
		g.Expect(got.Status.VMID).To(BeZero(), "nothing is reserved")
		g.Expect(got.Status.SourceTemplate).To(BeNil())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, dupTmpl)
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimTemplateResolvedCondition)).To(Equal(infrav1.TemplateAmbiguousReason))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(ownedVMs(dupSim)).To(BeEmpty())
}

// TestRecordedTemplateSurvivesRestart records a claim's template copy, stops the manager before the
// clone succeeds and changes the world so placement now prefers the other copy: the restarted
// manager still clones the recorded one, while a new claim goes to the other node.
func TestRecordedTemplateSurvivesRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: runnerCopies()})
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Status: 500, Message: "VM is locked (clone)"})
	stop := startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claim := builder.NewMachineClaim("kept", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").
		WithDiskGiB(40).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.SourceTemplate).NotTo(BeNil())
		g.Expect(got.Status.FailureCount).To(BeNumerically(">=", 1), "a clone was attempted")
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	stop()
	recorded := *get(g, claim).Status.SourceTemplate
	g.Expect(ownedVMs(sim)).To(BeEmpty())

	// Stop the foreign VM on the other node: it now has the most free memory.
	other := map[string]string{"pve1": "pve3", "pve3": "pve1"}[recorded.Node]
	g.Expect(sim.PowerOff(map[string]int{"pve1": 100, "pve3": 103}[other])).To(Succeed())
	sim.ClearFaults()
	startManager(t)

	g.Eventually(func(g Gomega) { expectClonedFromOwnNode(g, sim, claim) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	got := get(g, claim)
	g.Expect(*got.Status.SourceTemplate).To(Equal(recorded))
	g.Expect(got.Status.Node).To(Equal(recorded.Node))
	vm, _ := sim.VM(vmidOf(got.Status.VMID))
	g.Expect(vm.Disks["scsi0"]).To(ContainSubstring("size=40G"), "the disk was grown from the recorded copy's size")

	fresh := builder.NewMachineClaim("fresh", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, fresh)).To(Succeed())
	g.Eventually(func(g Gomega) { expectClonedFromOwnNode(g, sim, fresh) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(get(g, fresh).Status.Node).To(Equal(other), "placement now prefers the other copy")
}
