package machineclaimtemplate_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// TestMachineClaimTemplateChecks resolves the source template, checks capacity, and notices when
// the template is removed in Proxmox.
func TestMachineClaimTemplateChecks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim)

	ok := builder.NewMachineClaimTemplate("runner", ns).WithSpec(infrav1.MachineClaimSpec{
		HypervisorClusterName: "pve", Template: infrav1.TemplateSource{Name: "ubuntu-2404-runner", Tags: []string{"runner"}},
		Cores: 4, MemoryMiB: 8192}).Build()
	huge := builder.NewMachineClaimTemplate("huge", ns).WithSpec(infrav1.MachineClaimSpec{
		HypervisorClusterName: "pve", Template: infrav1.TemplateSource{ID: "9000"}, MemoryMiB: 4 << 20}).Build()
	missing := builder.NewMachineClaimTemplate("missing", ns).WithSpec(infrav1.MachineClaimSpec{
		HypervisorClusterName: "pve", Template: infrav1.TemplateSource{Name: "windows-2025"}}).Build()
	for _, o := range []*infrav1.MachineClaimTemplate{ok, huge, missing} {
		g.Expect(controllertest.Env.Client.Create(ctx, o)).To(Succeed())
	}

	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, ok)
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(got.Status.ResolvedTemplate).To(Equal("pve:pve1/9000"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, huge)
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimTemplateCapacityCondition)).To(Equal(infrav1.NoCapacityReason))
		g.Expect(conditions.IsFalse(got, infrav1.ReadyCondition)).To(BeTrue())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, missing)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.TemplateNotFoundReason))
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("windows-2025"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// Someone deletes the template in Proxmox: the next periodic check says so.
	g.Expect(sim.RemoveVM(9000)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, ok)
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimTemplateResolvedCondition)).To(Equal(infrav1.TemplateNotFoundReason))
		g.Expect(conditions.IsFalse(got, infrav1.ReadyCondition)).To(BeTrue())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
