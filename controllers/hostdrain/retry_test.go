package hostdrain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

const migrateEndpoint = "POST /nodes/{node}/qemu/{vmid}/migrate"

// drainOneVM starts a manager and a HypervisorCluster whose drainPolicy retries after 2 s, then 4 s, for three attempts, and a
// persistent VM on shared storage on pve1, with fault (if any) installed on PVE's migrate call;
// then pve1 goes into maintenance.
func drainOneVM(t *testing.T, fault pvesim.Fault) (string, *pvesim.Simulator, *infrav1.MachineClaim) {
	t.Helper()
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, drainInventory())
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		hc.Spec.DrainPolicy = &infrav1.DrainPolicy{MaxAttempts: 3, RetryInitialSeconds: 2, RetryMaxSeconds: 4}
	})
	db := controllertest.PersistentClaim(ns, "db-0", map[string]string{"app": "db"}, nil)
	db.Spec.FailureDomain = "pve1"
	g.Expect(env.Client.Create(context.Background(), db)).To(Succeed())
	controllertest.RunsOn(g, sim, db, "pve1")
	onSharedStorage(g, sim, get(g, db))
	sim.InjectFault(fault)
	setMaintenance(g, ns, "pve1", true)
	return ns, sim, db
}

func drainedCondition(g Gomega, ns string) *metav1.Condition {
	hc := &infrav1.HypervisorCluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
	c := conditions.Get(hc, infrav1.HypervisorClusterHostsDrainedCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestHostDrainRetriesFailedMigration: a drain migration that fails is tried again after a
// backoff that grows, and the host's status says how often it failed and why. A migration that
// fails once is followed by one that moves the VM; one that always fails is tried three times,
// no more, and HostsDrained then names the VM, its last MachineMigration and PVE's error.
func TestHostDrainRetriesFailedMigration(t *testing.T) {
	t.Run("FailsOnceThenMoves", func(t *testing.T) {
		g := NewWithT(t)
		ns, sim, db := drainOneVM(t, pvesim.Fault{Endpoint: migrateEndpoint, Count: 1, TaskExitStatus: "migration aborted: storage migration failed"})

		g.Eventually(func(g Gomega) {
			h := hostStatus(g, ns, "pve1")
			g.Expect(h.FailedMigrations).To(HaveLen(1))
			f := h.FailedMigrations[0]
			g.Expect(f.MachineClaim).To(Equal("db-0"))
			g.Expect(f.Attempts).To(Equal(int32(1)))
			g.Expect(f.LastFailure).To(ContainSubstring("storage migration failed"))
			g.Expect(f.NextAttemptTime).NotTo(BeNil())
			g.Expect(f.NextAttemptTime.Sub(f.LastFailureTime.Time)).To(Equal(2 * time.Second))
		}, 30*time.Second, 50*time.Millisecond).Should(Succeed(), "the failure is reported with the next attempt")

		controllertest.RunsOn(g, sim, db, "pve2")
		g.Eventually(func(g Gomega) {
			h := hostStatus(g, ns, "pve1")
			g.Expect(h.PersistentVMs).To(BeZero())
			g.Expect(h.FailedMigrations).To(BeEmpty())
			g.Expect(h.Drained).To(BeTrue())
			g.Expect(drainedCondition(g, ns).Reason).To(Equal(infrav1.HostsDrainedReason))
			ms := drainMigrations(g, ns)
			g.Expect(ms).To(HaveLen(1), "the failed attempt is gone once the next one exists")
			g.Expect(ms[0].Name).To(Equal("drain-pve1-db-0-retry2"))
			g.Expect(ms[0].Annotations).To(HaveKeyWithValue(fleetv1.DrainAttemptAnnotation, "2"))
			g.Expect(ms[0].Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Expect(sim.Requests()[migrateEndpoint]).To(Equal(2))
	})

	t.Run("AlwaysFailsGivesUp", func(t *testing.T) {
		g := NewWithT(t)
		ns, sim, db := drainOneVM(t, pvesim.Fault{Endpoint: migrateEndpoint, TaskExitStatus: "migration aborted: target node unreachable"})

		g.Eventually(func(g Gomega) {
			c := drainedCondition(g, ns)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.DrainMigrationFailedReason))
			g.Expect(c.Message).To(ContainSubstring("db-0: 3 migration(s) failed"))
			g.Expect(c.Message).To(ContainSubstring("MachineMigration drain-pve1-db-0-retry3"))
			g.Expect(c.Message).To(ContainSubstring("target node unreachable"))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		h := hostStatus(g, ns, "pve1")
		g.Expect(h.FailedMigrations).To(HaveLen(1))
		g.Expect(h.FailedMigrations[0].Attempts).To(Equal(int32(3)))
		g.Expect(h.FailedMigrations[0].NextAttemptTime).To(BeNil(), "no attempt after the last")
		g.Expect(h.BlockedBy).To(ContainElement(ContainSubstring("db-0: 3 migration(s) failed")))

		// No hot loop: three calls to PVE's migrate, and no more while the drain stays blocked.
		g.Expect(sim.Requests()[migrateEndpoint]).To(Equal(3))
		g.Consistently(func(g Gomega) {
			g.Expect(sim.Requests()[migrateEndpoint]).To(Equal(3))
			ms := drainMigrations(g, ns)
			g.Expect(ms).To(HaveLen(1), "only the last attempt is kept")
			g.Expect(ms[0].Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseFailed))
		}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
		g.Expect(get(g, db).Status.Node).To(Equal("pve1"), "the VM stays where it runs")
		vm, _ := sim.VM(vmidOf(get(g, db).Status.VMID))
		g.Expect(vm.Node).To(Equal("pve1"))
		g.Expect(vm.Status).To(Equal("running"))

		events := &corev1.EventList{}
		g.Expect(env.Client.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", infrav1.DrainMigrationFailedReason),
			HaveField("Type", corev1.EventTypeWarning), HaveField("Message", ContainSubstring("db-0")))))

		// Deleting the last failed attempt, as the condition says, starts the drain over.
		sim.ClearFaults()
		g.Expect(env.Client.Delete(context.Background(), &drainMigrations(g, ns)[0])).To(Succeed())
		controllertest.RunsOn(g, sim, db, "pve2")
		g.Eventually(func() string { return drainedCondition(g, ns).Reason }, 30*time.Second, 100*time.Millisecond).
			Should(Equal(infrav1.HostsDrainedReason))
		g.Expect(strings.Join(hostStatus(g, ns, "pve1").BlockedBy, "; ")).To(BeEmpty())
	})

	t.Run("LiftingMaintenanceStartsOver", func(t *testing.T) {
		g := NewWithT(t)
		ns, sim, db := drainOneVM(t, pvesim.Fault{Endpoint: migrateEndpoint, TaskExitStatus: "migration aborted: target node unreachable"})
		g.Eventually(func() string { return drainedCondition(g, ns).Reason }, 30*time.Second, 100*time.Millisecond).
			Should(Equal(infrav1.DrainMigrationFailedReason))

		// Lifting maintenance ends the drain: its finished attempts are deleted.
		setMaintenance(g, ns, "pve1", false)
		g.Eventually(func(g Gomega) {
			g.Expect(drainMigrations(g, ns)).To(BeEmpty())
			g.Expect(drainedCondition(g, ns).Reason).To(Equal(infrav1.NoMaintenanceReason))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		// The next maintenance starts afresh with a first attempt, which moves the VM.
		sim.ClearFaults()
		setMaintenance(g, ns, "pve1", true)
		controllertest.RunsOn(g, sim, db, "pve2")
		g.Eventually(func(g Gomega) {
			ms := drainMigrations(g, ns)
			g.Expect(ms).To(HaveLen(1))
			g.Expect(ms[0].Name).To(Equal("drain-pve1-db-0"))
			g.Expect(drainedCondition(g, ns).Reason).To(Equal(infrav1.HostsDrainedReason))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Expect(sim.Requests()[migrateEndpoint]).To(Equal(4), "three failed attempts, then one move")
	})
}
