package machinemigration_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// migratableVM is a running persistent VM on a simulator with shared storage besides the local
// ones.
func migratableVM(t *testing.T) (*infrav1.MachineClaim, *pvesim.Simulator) {
	claim, sim, _ := migratableVMRecorded(t)
	return claim, sim
}

// migratableVMRecorded is migratableVM with a manager that keeps an audit log, at the URL returned.
func migratableVMRecorded(t *testing.T) (*infrav1.MachineClaim, *pvesim.Simulator, string) {
	inv := pvesim.DefaultInventory()
	inv.Storages = append(inv.Storages, pvesim.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true, TotalGiB: 1024})
	historyURL := "sqlite://" + filepath.Join(t.TempDir(), "history.db")
	claim, sim := controllertest.PersistentVMIn(t, pvesim.Config{Inventory: inv},
		controllertest.Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second, HistoryURL: historyURL}, infrav1.RunStrategyAlways)
	NewWithT(t).Eventually(func(g Gomega) infrav1.MachineClaimPhase { return controllertest.Get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseRunning))
	return claim, sim, historyURL
}

// TestMachineMigrationFailsThenSucceeds moves a running persistent VM with the real manager and
// the Proxmox simulator: first PVE refuses it (its disk is on local storage; the task fails with
// PVE's text, the VM stays), a migration the claim's policy forbids is refused without asking
// PVE, then on shared storage it moves live to the host asked for while the claim shows
// Migrating, and the claim records its new host and keeps running. The audit log has each move
// HyperFleet started, and not the one it refused.
func TestMachineMigrationFailsThenSucceeds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim, historyURL := migratableVMRecorded(t)
	ns, vmid := claim.Namespace, controllertest.VMIDOf(claim.Status.VMID)
	source := controllertest.Get(g, claim).Status.Node

	failed := builder.NewMachineMigration("local-disk", ns, claim.Name, fleetv1.MigrationTargetAny)
	g.Expect(controllertest.Env.Client.Create(ctx, failed)).To(Succeed())
	got := controllertest.MigrationDone(g, failed)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseFailed))
	g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.MigrationFailedReason))
	g.Expect(got.Status.Error).To(ContainSubstring("can't migrate local disk"))
	g.Expect(got.Status.SourceHost).To(Equal(source))
	g.Expect(got.Status.TargetHost).NotTo(Or(BeEmpty(), Equal(source)))
	g.Expect(got.Status.StartTime).NotTo(BeNil())
	g.Expect(got.Status.EndTime).NotTo(BeNil())
	vm, _ := sim.VM(vmid)
	g.Expect(vm.Node).To(Equal(source))
	g.Eventually(func() map[string]string { return controllertest.Get(g, claim).Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(infrav1.MigrationInProgressAnnotation))

	forbidden := builder.NewMachineMigration("with-disks", ns, claim.Name, fleetv1.MigrationTargetAny)
	forbidden.Spec.WithLocalDisks = true
	g.Expect(controllertest.Env.Client.Create(ctx, forbidden)).To(Succeed())
	got = controllertest.MigrationDone(g, forbidden)
	g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.MigrationForbiddenReason))
	g.Expect(got.Status.Error).To(ContainSubstring("allowLocalDisks"))

	// On shared storage the VM can move live; the task runs long enough to watch the claim.
	controllertest.OnSharedStorage(g, sim, claim)
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/migrate", Count: 1, TaskDuration: 3 * time.Second})
	ok := builder.NewMachineMigration("to-pve3", ns, claim.Name, "pve3")
	g.Expect(controllertest.Env.Client.Create(ctx, ok)).To(Succeed())
	g.Eventually(func() infrav1.MachineClaimPhase { return controllertest.Get(g, claim).Status.Phase }, 10*time.Second, 50*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseMigrating))
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, ok)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseRunning))
		g.Expect(got.Status.Task).NotTo(BeNil())
		g.Expect(controllertest.Get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseMigrating))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	got = controllertest.MigrationDone(g, ok)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded), "%+v", got.Status)
	g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue())
	g.Expect(got.Status.Online).To(BeTrue())
	g.Expect(got.Status.TargetHost).To(Equal("pve3"))
	vm, _ = sim.VM(vmid)
	g.Expect(vm.Node).To(Equal("pve3"))
	g.Expect(vm.Status).To(Equal("running"))
	g.Eventually(func(g Gomega) {
		c := controllertest.Get(g, claim)
		g.Expect(c.Status.Node).To(Equal("pve3"))
		g.Expect(c.Annotations).NotTo(HaveKey(infrav1.MigrationInProgressAnnotation))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(controllertest.VMStatus(sim, claim), time.Second, 100*time.Millisecond).Should(Equal("running"))

	store, err := history.Open(ctx, historyURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	g.Eventually(func(g Gomega) []string {
		entries, err := store.Audit(ctx, history.AuditQuery{Namespaces: []string{ns}, Name: claim.Name})
		g.Expect(err).NotTo(HaveOccurred())
		var moves []string
		for _, e := range entries {
			if e.Action == "migrate-vm" {
				g.Expect(e.Actor.Subject).To(Equal("hyperfleet-manager"))
				moves = append(moves, e.Reason)
			}
		}
		return moves
	}, 10*time.Second, 100*time.Millisecond).Should(And(
		ContainElements(HavePrefix("MachineMigration local-disk: moving VM "), HavePrefix("MachineMigration to-pve3: moving VM "+source+"/")),
		HaveEach(Or(HavePrefix("MachineMigration local-disk: moving VM "), HavePrefix("MachineMigration to-pve3: moving VM "+source+"/")))),
		"each move the hypervisor accepted, and no other (a start repeated after a lost status write is a second entry)")
}

// TestMachineMigrationCancelledByDeletion deletes a MachineMigration while PVE's task runs: the
// task is interrupted, the VM stays on its host, and the claim is handed back. A claim whose
// migrationPolicy is None is never moved.
func TestMachineMigrationCancelledByDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := migratableVM(t)
	ns, vmid := claim.Namespace, controllertest.VMIDOf(claim.Status.VMID)
	source := controllertest.Get(g, claim).Status.Node
	controllertest.OnSharedStorage(g, sim, claim)
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/migrate", Count: 1, TaskDuration: 30 * time.Second})

	m := builder.NewMachineMigration("cancel-me", ns, claim.Name, fleetv1.MigrationTargetAny)
	g.Expect(controllertest.Env.Client.Create(ctx, m)).To(Succeed())
	g.Eventually(func() *fleetv1.MigrationTask { return controllertest.Get(g, m).Status.Task }, 20*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	g.Expect(controllertest.Env.Client.Delete(ctx, m)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, controllertest.KeyOf(m), &fleetv1.MachineMigration{}))
	},
		20*time.Second, 100*time.Millisecond).Should(BeTrue(), "the cancelled task ends long before its 30s")
	vm, _ := sim.VM(vmid)
	g.Expect(vm.Node).To(Equal(source))
	g.Expect(vm.Lock).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		c := controllertest.Get(g, claim)
		g.Expect(c.Annotations).NotTo(HaveKey(infrav1.MigrationInProgressAnnotation))
		g.Expect(c.Status.Node).To(Equal(source))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	c := controllertest.Get(g, claim)
	p := client.MergeFrom(c.DeepCopy())
	c.Spec.MigrationPolicy = &infrav1.MigrationPolicy{Strategy: infrav1.MigrationStrategyNone}
	g.Expect(controllertest.Env.Client.Patch(ctx, c, p)).To(Succeed())
	never := builder.NewMachineMigration("never", ns, claim.Name, "pve2")
	never.Spec.Online = ptr.To(true)
	g.Expect(controllertest.Env.Client.Create(ctx, never)).To(Succeed())
	got := controllertest.MigrationDone(g, never)
	g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.MigrationForbiddenReason))
	vm, _ = sim.VM(vmid)
	g.Expect(vm.Node).To(Equal(source))
}

// TestMachineMigrationAvoidsHostsInMaintenance marks pve3, the host with the most free memory, for
// maintenance on the HypervisorCluster: a migration to "any" goes elsewhere, and one that names
// pve3 is refused.
func TestMachineMigrationAvoidsHostsInMaintenance(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := migratableVM(t)
	ns, vmid := claim.Namespace, controllertest.VMIDOf(claim.Status.VMID)
	source := controllertest.Get(g, claim).Status.Node
	controllertest.OnSharedStorage(g, sim, claim)
	hc := &infrav1.HypervisorCluster{}
	g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
	p := client.MergeFrom(hc.DeepCopy())
	hc.Spec.Hosts = []infrav1.HypervisorHost{{Name: "pve3", Maintenance: true, Labels: map[string]string{"rack": "b"}}}
	g.Expect(controllertest.Env.Client.Patch(ctx, hc, p)).To(Succeed())

	named := builder.NewMachineMigration("to-pve3", ns, claim.Name, "pve3")
	g.Expect(controllertest.Env.Client.Create(ctx, named)).To(Succeed())
	got := controllertest.MigrationDone(g, named)
	g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.NoTargetHostReason))
	g.Expect(got.Status.Error).To(ContainSubstring("pve3 is in maintenance"))

	anyHost := builder.NewMachineMigration("anywhere", ns, claim.Name, fleetv1.MigrationTargetAny)
	g.Expect(controllertest.Env.Client.Create(ctx, anyHost)).To(Succeed())
	got = controllertest.MigrationDone(g, anyHost)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded), "%+v", got.Status)
	g.Expect(got.Status.TargetHost).NotTo(Or(Equal("pve3"), Equal(source)))
	vm, _ := sim.VM(vmid)
	g.Expect(vm.Node).To(Equal(got.Status.TargetHost))
}
