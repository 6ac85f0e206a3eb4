package machineclaim_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestRunnerPlacementUsesTheHealthChecksNodes: runner VMs are placed by the health check's node
// listing, without a node listing of their own, and a VM started after that listing still counts
// against its node. pve1 and pve3 have the same free memory in the listing; the first runner takes
// pve1 and is running before the second is placed. The listing does not show it, so the second
// goes to pve3 only if the started VM is counted.
func TestRunnerPlacementUsesTheHealthChecksNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: runnerCopies()})
	// Health checks a minute apart: the first one runs at once, the next after the test.
	startManager(t, testTiming{Sweep: time.Minute, OrphanGrace: time.Minute})
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve", sim)
	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
		g.Expect(got.Status.LastSweepTime).NotTo(BeNil())
		// The controller's own spec writes (installation ID, control plane endpoint) each bring
		// one more check; once it has observed the last of them, the next is a minute away.
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	sim.ResetRequests()

	first := builder.NewMachineClaim("placed-a", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, first).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(first.Status.CompletedStep).To(Equal(infrav1.StepStarted))

	second := builder.NewMachineClaim("placed-b", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, second).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())

	g.Expect([]string{first.Status.Node, second.Status.Node}).To(Equal([]string{"pve1", "pve3"}),
		"the VM started after the listing counts against pve1")
	g.Expect(sim.Requests()).NotTo(HaveKey("GET /nodes"), "placed by the health check's listing")
}
