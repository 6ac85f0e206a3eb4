package hostdrain_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestHyperVHostDrain: the host drain is the same on Hyper-V: a persistent VM on a host put into
// maintenance is moved by a MachineMigration the drain creates (Move-VM, live, with its disk), and
// the host is reported drained.
func TestHyperVHostDrain(t *testing.T) {
	g := NewWithT(t)
	claim, sim := controllertest.PersistentHyperVVM(t, hvsim.HyperVConfig{}, "hv1", "hv2")
	source, id := claim.Status.Node, claim.Status.VMID
	target := map[string]string{"hv1": "hv2", "hv2": "hv1"}[source]
	for _, h := range []string{"hv1", "hv2"} {
		g.Expect(sim.EnableMigration(h, true)).To(Succeed())
	}

	controllertest.SetMaintenance(g, claim.Namespace, "hv", source, true)
	g.Eventually(func(g Gomega) {
		ms := drainMigrations(g, claim.Namespace)
		g.Expect(ms).To(HaveLen(1))
		g.Expect(ms[0].Spec.MachineClaimName).To(Equal(claim.Name))
		g.Expect(ms[0].Spec.Target).To(Equal(target))
		g.Expect(ms[0].Labels).To(HaveKeyWithValue(fleetv1.DrainHypervisorClusterLabel, "hv"))
		g.Expect(ms[0].Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded), "%+v", ms[0].Status)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Node).To(Equal(target))
		h := hostStatusOf(g, claim.Namespace, "hv", source)
		g.Expect(h.PersistentVMs).To(BeZero())
		g.Expect(h.Drained).To(BeTrue())
		hc := &infrav1.HypervisorCluster{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: claim.Namespace, Name: "hv"}, hc)).To(Succeed())
		g.Expect(conditions.GetReason(hc, infrav1.HypervisorClusterHostsDrainedCondition)).To(Equal(infrav1.HostsDrainedReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(sim.VMs(source)).To(BeEmpty())
	g.Expect(controllertest.HyperVVMState(sim, target, id)).To(Equal(2), "the same VM, running on the other host")
}
