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

// TestTemplateResolutionIsShared provisions five claims of one HypervisorCluster and counts the
// simulator's listings of every VM of the cluster (GET /cluster/resources), which each template
// resolution costs. Each claim used to resolve its template three times (placement, clone,
// configure), three listings per claim; shared per HypervisorCluster it is about one in all.
func TestTemplateResolutionIsShared(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	// Sweeps a minute apart: the first one runs at once, the next after the measurement.
	startManager(t, testTiming{Sweep: time.Minute, OrphanGrace: time.Minute})
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve", sim)
	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
		g.Expect(got.Status.LastSweepTime).NotTo(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	sim.ResetRequests()

	const n = 5
	claims := make([]*infrav1.MachineClaim, n)
	for i := range claims {
		claims[i] = builder.NewMachineClaim(fmt.Sprintf("runner-%d", i), ns).WithHypervisorCluster("pve").Build()
		g.Expect(env.Client.Create(ctx, claims[i])).To(Succeed())
	}
	for _, c := range claims {
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, c).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
		}, 90*time.Second, 100*time.Millisecond).Should(Succeed())
	}
	reqs := sim.Requests()
	total := 0
	for _, v := range reqs {
		total += v
	}
	lists := reqs["GET /cluster/resources"]
	t.Logf("%d claims provisioned: %d cluster listings, %d calls (%.1f per VM); %v", n, lists, total, float64(total)/n, reqs)
	// Concurrent reconciles that miss the cache together share one resolution; the VMIDs come
	// from that listing too. One more is allowed for a resolution that expired meanwhile.
	g.Expect(lists).To(BeNumerically("<=", 2), "template resolutions are shared, not made per claim and step")
}
