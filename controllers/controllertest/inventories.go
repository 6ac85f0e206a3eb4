package controllertest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TemplateOnEveryHost is the default inventory with a copy of the Ubuntu runner template on each
// host, as clusters on local storage keep them, so a linked clone can be made anywhere.
func TemplateOnEveryHost() pvesim.Config {
	inv := pvesim.DefaultInventory()
	inv.VMs = append(inv.VMs,
		pvesim.RunnerTemplate(9100, "pve2", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu"),
		pvesim.RunnerTemplate(9200, "pve3", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu"))
	return pvesim.Config{Inventory: inv}
}

// UserData is the bootstrap data the tests' claims boot with.
const UserData = "#cloud-config\nruncmd:\n- echo bootstrap\n"

// PersistentClaim is a standalone persistent claim that may be cloned on any host of
// TemplateOnEveryHost.
func PersistentClaim(ns, name string, labels map[string]string, p *infrav1.PlacementSpec) *infrav1.MachineClaim {
	b := builder.NewMachineClaim(name, ns).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
		WithTemplateName("ubuntu-2404-runner", "runner").WithLabels(labels)
	if p != nil {
		b = b.WithPlacement(*p)
	}
	return b.Build()
}

// SetMaintenance sets one host's maintenance flag on the HypervisorCluster ns/cluster.
func SetMaintenance(g Gomega, ns, cluster, host string, on bool) {
	hc := &infrav1.HypervisorCluster{}
	g.Expect(Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, hc)).To(Succeed())
	p := client.MergeFrom(hc.DeepCopy())
	found := false
	for i := range hc.Spec.Hosts {
		if hc.Spec.Hosts[i].Name == host {
			hc.Spec.Hosts[i].Maintenance, found = on, true
		}
	}
	if !found {
		hc.Spec.Hosts = append(hc.Spec.Hosts, infrav1.HypervisorHost{Name: host, Maintenance: on})
	}
	g.Expect(Env.Client.Patch(context.Background(), hc, p)).To(Succeed())
}

// RunsOn waits for the claim's VM to run on host, in the claim's status and on the simulator.
func RunsOn(g Gomega, sim *pvesim.Simulator, claim *infrav1.MachineClaim, host string) {
	g.Eventually(func(g Gomega) {
		c := Get(g, claim)
		g.Expect(c.Status.Node).To(Equal(host))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "%+v", c.Status.Conditions)
		vm, ok := sim.VM(VMIDOf(c.Status.VMID))
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Node).To(Equal(host))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
}

// PersistentHyperVVM is a running persistent claim (run strategy Always) on simulated Hyper-V hosts,
// whose migrationPolicy lets a move copy its local disk.
func PersistentHyperVVM(t *testing.T, cfg hvsim.HyperVConfig, hosts ...string) (*infrav1.MachineClaim, *hvsim.HyperVHosts) {
	t.Helper()
	g := NewWithT(t)
	cfg.BootHook = func(ctx context.Context, _ hvsim.HyperVBootVM) error { <-ctx.Done(); return nil }
	sim := hvsim.StartHyperVForTest(t, cfg, hosts...)
	StartManager(t)
	ns := NewNamespace(t)
	HyperVCluster(t, ns, "hv", sim)
	claim := builder.NewMachineClaim("db-0", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithNetwork(hvsim.HyperVSwitch, 0).WithResources(2, 2048).WithPersistent(infrav1.RunStrategyAlways).Build()
	claim.Spec.MigrationPolicy = &infrav1.MigrationPolicy{Strategy: infrav1.MigrationStrategyLive, AllowLocalDisks: true}
	g.Expect(Env.Client.Create(context.Background(), claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := Get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return Get(g, claim), sim
}

// HyperVVMState is the simulator's state of the claim's VM on host (0 when it is not there).
func HyperVVMState(sim *hvsim.HyperVHosts, host, id string) int {
	for _, vm := range sim.VMs(host) {
		if vm.ID == id {
			return vm.State
		}
	}
	return 0
}
