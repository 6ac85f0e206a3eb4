package machineclaim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestSweepStatusWakesNoClaim counts claim reconciles (every manager of the test process
// together: no other test's claim waits in this window) and sweeps while a HypervisorCluster is swept every 300 ms
// and its claims wait (each for a template that does not exist, in backoff of 5 s and more). Every
// sweep writes the HypervisorCluster's status.lastSweepTime; that write must wake neither its
// claims (each woken claim would poll its task or guest agent again) nor the HypervisorCluster's
// own controller.
func TestSweepStatusWakesNoClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Minute})
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve", sim)
	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
		g.Expect(got.Status.LastSweepTime).NotTo(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	const n = 6
	claims := make([]*infrav1.MachineClaim, n)
	for i := range claims {
		claims[i] = builder.NewMachineClaim(fmt.Sprintf("waiting-%d", i), ns).WithHypervisorCluster("pve").
			WithTemplateName("no-such-template").Build()
		g.Expect(env.Client.Create(ctx, claims[i])).To(Succeed())
	}
	for _, c := range claims {
		g.Eventually(func(g Gomega) {
			got := get(g, c)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseFailed))
			g.Expect(got.Labels).To(HaveKeyWithValue(infrav1.HypervisorClusterNameLabel, "pve"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	}

	const window = 3 * time.Second
	claimsBefore := reconciles("machineclaim")
	sim.ResetRequests()
	time.Sleep(window)
	claimReconciles := reconciles("machineclaim") - claimsBefore
	sweeps := sim.Requests()["GET /cluster/resources"]
	t.Logf("over %s: %d sweeps, %.0f MachineClaim reconciles of %d waiting claims", window, sweeps, claimReconciles, n)
	g.Expect(sweeps).To(BeNumerically(">=", 5), "the sweep runs every 300 ms")
	// Each claim may come back once from its own backoff within the window (and once more for
	// the status that attempt writes); woken by every sweep, they came back three times as often.
	g.Expect(claimReconciles).To(BeNumerically("<=", n+2), "a sweep's status write woke the waiting claims")
	// One sweep per interval, plus one for a window boundary and one for a slow sweep's drift.
	g.Expect(sweeps).To(BeNumerically("<=", int(window/(300*time.Millisecond))+2), "a sweep's status write woke another sweep")
}

// reconciles is controller-runtime's count of reconciles of a controller, every manager of the
// test process together.
func reconciles(controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
