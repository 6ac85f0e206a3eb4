package hypervisorcluster_test

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
	startManager(t, testTiming{Sweep: time.Second, OrphanGrace: 2 * time.Second})
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

// TestHypervisorClusterReportsLongLivedVMPrivileges: a token with what runners need but not the
// privileges of snapshots, restores and migration leaves the cluster Available and says, in
// LongLivedVMPrivileges, which privilege each feature lacks, before anyone's first snapshot fails;
// a token without privilege separation has them all.
func TestHypervisorClusterReportsLongLivedVMPrivileges(t *testing.T) {
	g := NewWithT(t)
	runnerPrivs := []string{"VM.Allocate", "VM.Clone", "VM.Audit", "VM.PowerMgmt", "VM.Config.CPU", "VM.Config.Memory",
		"VM.Config.Network", "VM.Config.Options", "VM.Config.Disk", "VM.Config.CDROM", "VM.GuestAgent.Audit",
		"VM.GuestAgent.Unrestricted", "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Allocate", "Sys.Audit", "SDN.Use"}
	limited := pvesim.StartForTest(t, pvesim.Config{Tokens: []pvesim.Token{{ID: pvesim.TestTokenID, Secret: pvesim.TestTokenSecret, Privileges: runnerPrivs}}})
	full := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	a := proxmoxCluster(t, ns, "limited", limited)
	b := proxmoxCluster(t, ns, "full", full)
	g.Eventually(func(g Gomega) {
		got := get(g, a)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue(), "runners need none of them")
		c := conditions.Get(got, infrav1.HypervisorClusterLongLivedVMPrivilegesCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(infrav1.HypervisorClusterPrivilegesMissingReason))
		g.Expect(c.Message).To(ContainSubstring("VM.Snapshot on /vms (MachineSnapshots and their schedules)"))
		g.Expect(c.Message).To(ContainSubstring("VM.Migrate on /vms"))
		g.Expect(c.Message).NotTo(ContainSubstring("hooks"), "the token may run hooks")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(get(g, b), infrav1.HypervisorClusterLongLivedVMPrivilegesCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
