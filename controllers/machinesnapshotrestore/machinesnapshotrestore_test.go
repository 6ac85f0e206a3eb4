package machinesnapshotrestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// TestMachineSnapshotCreateRestoreDelete takes a snapshot of a running persistent VM, restores it
// after the guest wrote more data (the VM is stopped for the rollback and started again), and
// deleting the MachineSnapshot removes the hypervisor snapshot. Each change to the VM is in the
// audit log with the request that asked for it.
func TestMachineSnapshotCreateRestoreDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	historyURL := "sqlite://" + filepath.Join(t.TempDir(), "history.db")
	claim, sim := controllertest.PersistentVMWith(t, controllertest.Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second, HistoryURL: historyURL},
		infrav1.RunStrategyAlways)
	ns, vmid := claim.Namespace, controllertest.VMIDOf(claim.Status.VMID)
	g.Eventually(func() infrav1.MachineClaimPhase { return controllertest.Get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseRunning))
	g.Expect(sim.WriteGuestData(vmid, "v1")).To(Succeed())

	snap := builder.NewMachineSnapshot("before-upgrade", ns, claim.Name)
	snap.Spec.Description = "before the upgrade"
	g.Expect(controllertest.Env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseSucceeded))
		g.Expect(got.Status.ReadyToUse).To(BeTrue())
		g.Expect(got.Status.CreationTime).NotTo(BeNil())
		g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue())
		g.Expect(got.OwnerReferences).To(ContainElement(HaveField("Name", claim.Name)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	name := controllertest.Get(g, snap).Status.SnapshotName
	vm, _ := sim.VM(vmid)
	g.Expect(vm.Snapshots).To(Equal([]string{name}))

	g.Expect(sim.WriteGuestData(vmid, "v2")).To(Succeed())
	restore := builder.NewMachineSnapshotRestore("back", ns, claim.Name, snap.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, restore)
		g.Expect(got.Status.Complete).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.RestoreCompleteReason))
		g.Expect(*got.Status.WasRunning).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	vm, _ = sim.VM(vmid)
	g.Expect(vm.GuestData).To(Equal("v1"), "the disks are back at the snapshot")
	g.Eventually(controllertest.VMStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"), "a VM that ran runs again")
	g.Eventually(func() map[string]string { return controllertest.Get(g, claim).Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(infrav1.RestoreInProgressAnnotation), "the claim is handed back to its run strategy: %+v", controllertest.Get(g, restore).Status)

	// A snapshot restores only onto the VM it was taken of.
	wrong := builder.NewMachineSnapshotRestore("wrong", ns, "another-claim", snap.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, wrong)).To(Succeed())
	g.Eventually(func() string { return conditions.GetReason(controllertest.Get(g, wrong), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(fleetv1.RestoreFailedReason))

	// clusterctl move deletes the source copy of a moved snapshot: the hypervisor snapshot stays.
	moved := builder.NewMachineSnapshot("moved", ns, claim.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, moved)).To(Succeed())
	g.Eventually(func() bool { return controllertest.Get(g, moved).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	movedName := controllertest.Get(g, moved).Status.SnapshotName
	got := controllertest.Get(g, moved)
	p := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
	g.Expect(controllertest.Env.Client.Patch(ctx, got, p)).To(Succeed())
	g.Expect(controllertest.Env.Client.Delete(ctx, moved)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, controllertest.KeyOf(moved), &fleetv1.MachineSnapshot{}))
	},
		30*time.Second, 100*time.Millisecond).Should(BeTrue())

	g.Expect(controllertest.Env.Client.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, controllertest.KeyOf(snap), &fleetv1.MachineSnapshot{}))
	},
		30*time.Second, 100*time.Millisecond).Should(BeTrue())
	vm, _ = sim.VM(vmid)
	g.Expect(vm.Snapshots).To(Equal([]string{movedName}),
		"deleting the MachineSnapshot removed its hypervisor snapshot; the moved one's stays")

	store, err := history.Open(ctx, historyURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	g.Eventually(func(g Gomega) {
		entries, err := store.Audit(ctx, history.AuditQuery{Namespaces: []string{ns}, Name: claim.Name})
		g.Expect(err).NotTo(HaveOccurred())
		reasons := map[string][]string{}
		for _, e := range entries {
			g.Expect(e.Actor.Subject).To(Equal("hyperfleet-manager"))
			reasons[e.Action] = append(reasons[e.Action], e.Reason)
		}
		g.Expect(reasons["snapshot-vm"]).To(ContainElements(HavePrefix("MachineSnapshot before-upgrade: taking snapshot "+name), HavePrefix("MachineSnapshot moved: ")))
		g.Expect(reasons["snapshot-vm"]).To(HaveEach(Or(HavePrefix("MachineSnapshot before-upgrade: taking snapshot "+name), HavePrefix("MachineSnapshot moved: "))))
		// At least one: a reconcile whose status write lost a race starts the rollback again, and
		// the log records each rollback the hypervisor accepted.
		g.Expect(reasons["restore-vm"]).NotTo(BeEmpty())
		g.Expect(reasons["restore-vm"]).To(HaveEach("MachineSnapshotRestore back: rolling back to snapshot " + name + " (MachineSnapshot before-upgrade)"))
		g.Expect(reasons["delete-snapshot"]).NotTo(BeEmpty())
		g.Expect(reasons["delete-snapshot"]).To(HaveEach("MachineSnapshot before-upgrade deleted: removing snapshot "+name),
			"the moved snapshot's removal from this cluster left the hypervisor's alone, and the log says nothing of it")
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}
