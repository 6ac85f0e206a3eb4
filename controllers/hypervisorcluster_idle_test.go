package controllers_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestIdleHypervisorClusterSweepsOncePerInterval counts an idle HypervisorCluster's calls on the
// simulator. Each health check and sweep writes status.lastSweepTime; that write must not wake the
// controller for a second check and sweep right after the first. With a 1 s interval each write
// lands in a new second, so a controller woken by its own status runs two sweeps a second.
func TestIdleHypervisorClusterSweepsOncePerInterval(t *testing.T) {
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{sweep: time.Second, orphanGrace: 2 * time.Second})
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		hc.Spec.HealthCheckInterval = &metav1.Duration{Duration: time.Second}
	})
	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue(), "%+v", got.Status)
		g.Expect(got.Status.LastSweepTime).NotTo(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	time.Sleep(time.Second) // the installation ID and finalizer writes are behind us

	const window = 6 * time.Second
	sim.ResetRequests()
	time.Sleep(window)
	reqs := sim.Requests()
	total := 0
	for _, n := range reqs {
		total += n
	}
	sweeps := reqs["GET /cluster/resources"]
	perSweep := float64(total) / float64(max(sweeps, 1))
	t.Logf("idle HypervisorCluster over %s at a 1s interval: %d sweeps (%.2f per interval), %.1f calls per sweep "+
		"(one sweep per interval: %.1f calls per minute at the default 30s interval); %v", window, sweeps,
		float64(sweeps)/window.Seconds(), perSweep, 2*perSweep, reqs)
	// One sweep per interval, plus one for a window boundary and one for a slow sweep's drift.
	g.Expect(sweeps).To(BeNumerically(">=", 4), "the sweep still runs every interval")
	g.Expect(sweeps).To(BeNumerically("<=", 8), "a status write woke a second sweep")
	g.Expect(reqs["GET /version"]).To(BeNumerically("<=", 8), "a status write woke a second health check")
}
