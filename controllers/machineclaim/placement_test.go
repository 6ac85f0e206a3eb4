package machineclaim_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// labelledHosts declares host labels on the HypervisorCluster: pve1 rack a, pve2 rack b with a
// GPU, pve3 rack b. In the default inventory pve3 has the most free memory, so a claim without
// placement rules goes there.
func labelledHosts(hc *infrav1.HypervisorCluster) {
	hc.Spec.Hosts = []infrav1.HypervisorHost{
		{Name: "pve1", Labels: map[string]string{"rack": "a"}},
		{Name: "pve2", Labels: map[string]string{"rack": "b", "gpu": "true"}},
		{Name: "pve3", Labels: map[string]string{"rack": "b"}},
	}
}

// TestPersistentPlacementHostSelector places new persistent VMs by their placement rules with the
// real manager and the Proxmox simulator: a host selector sends a VM to the one GPU host rather
// than the emptiest; a second VM that must avoid the first and needs a GPU host fits nowhere and
// says why of each host, without creating a VM; once the HypervisorCluster labels another host
// with a GPU, it is placed there. A third that fits nowhere is placed as soon as another leaves.
func TestPersistentPlacementHostSelector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, controllertest.TemplateOnEveryHost())
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim, labelledHosts)

	gpu := &metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "true"}}
	first := controllertest.PersistentClaim(ns, "ml-0", map[string]string{"app": "ml"}, &infrav1.PlacementSpec{HostSelector: gpu})
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	controllertest.RunsOn(g, sim, first, "pve2")

	second := controllertest.PersistentClaim(ns, "ml-1", map[string]string{"app": "ml"}, &infrav1.PlacementSpec{HostSelector: gpu,
		AntiAffinity: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "ml"}}}})
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := get(g, second)
		g.Expect(conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.NoHostFitsReason))
		msg := conditions.GetMessage(c, infrav1.MachineClaimVMProvisionedCondition)
		g.Expect(msg).To(ContainSubstring("pve1: labels do not match hostSelector gpu=true"))
		g.Expect(msg).To(ContainSubstring("pve2: runs ml-0, which matches anti-affinity app=ml"))
		g.Expect(msg).To(ContainSubstring("pve3: labels do not match hostSelector gpu=true"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		c := get(g, second)
		g.Expect(c.Status.VMID).To(BeEmpty())
		g.Expect(c.Status.FailureCount).To(BeZero(), "waiting for a host is not a failure with a growing backoff")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	hc := &infrav1.HypervisorCluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
	p := client.MergeFrom(hc.DeepCopy())
	hc.Spec.Hosts[2].Labels["gpu"] = "true"
	g.Expect(env.Client.Patch(ctx, hc, p)).To(Succeed())
	controllertest.RunsOn(g, sim, second, "pve3")
	controllertest.RunsOn(g, sim, first, "pve2")

	// A third replica fits nowhere until another leaves: deleting ml-0 wakes it at once (well
	// before its one-minute recheck) and it takes ml-0's host.
	third := controllertest.PersistentClaim(ns, "ml-2", map[string]string{"app": "ml"}, second.Spec.Placement)
	g.Expect(env.Client.Create(ctx, third)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		return conditions.GetReason(get(g, third), infrav1.MachineClaimVMProvisionedCondition)
	}, 30*time.Second, 100*time.Millisecond).Should(Equal(infrav1.NoHostFitsReason))
	g.Expect(env.Client.Delete(ctx, get(g, first))).To(Succeed())
	g.Eventually(func(g Gomega) string { return get(g, third).Status.Node }, 20*time.Second, 100*time.Millisecond).Should(Equal("pve2"))
}

// TestPCIDevicesSteerPlacement: a VM passing through a PCI device by a Proxmox resource mapping is
// placed only on a node that has a device for it, read from the cluster's mapping listing: a GPU
// VM goes to the one node with the GPU, not to the emptiest node (where its start would fail with
// PVE's "PCI device mapping not found"), and a standalone runner-style claim too; a VM naming a
// mapping no node has waits with reason NoHostFits naming each node and why, and makes no VM.
func TestPCIDevicesSteerPlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := controllertest.TemplateOnEveryHost()
	cfg.Inventory.PCIMappings = []pvesim.PCIMappingSpec{{ID: "gpu", Nodes: []string{"pve2"}}}
	sim := pvesim.StartForTest(t, cfg)
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)

	gpu := infrav1.PCIDevice{Mapping: "gpu", PCIe: true}
	ml := builder.NewMachineClaim("ml-0", ns).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
		WithTemplateName("ubuntu-2404-runner", "runner").WithPCIDevices(gpu).Build()
	g.Expect(env.Client.Create(ctx, ml)).To(Succeed())
	controllertest.RunsOn(g, sim, ml, "pve2") // pve3 has the most free memory, and no GPU

	job := builder.NewMachineClaim("gpu-job", ns).WithHypervisorCluster("pve").
		WithTemplateName("ubuntu-2404-runner", "runner").WithPCIDevices(gpu).Build()
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := get(g, job)
		g.Expect(c.Status.Node).To(Equal("pve2"))
		vm, ok := sim.VM(vmidOf(c.Status.VMID))
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

	fpga := builder.NewMachineClaim("fpga-0", ns).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
		WithTemplateName("ubuntu-2404-runner", "runner").WithPCIDevices(infrav1.PCIDevice{Mapping: "fpga"}).Build()
	g.Expect(env.Client.Create(ctx, fpga)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := get(g, fpga)
		g.Expect(conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.NoHostFitsReason))
		msg := conditions.GetMessage(c, infrav1.MachineClaimVMProvisionedCondition)
		for _, n := range []string{"pve1", "pve2", "pve3"} {
			g.Expect(msg).To(ContainSubstring(n + ": has no device for PCI mapping fpga"))
		}
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func() string { return get(g, fpga).Status.VMID }, 2*time.Second, 200*time.Millisecond).Should(BeEmpty())
}
