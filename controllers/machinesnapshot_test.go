package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func newSnapshot(name, ns, claim string) *fleetv1.MachineSnapshot {
	return &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.MachineSnapshotSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: claim}}}
}

func newRestore(name, ns, claim, snapshot string) *fleetv1.MachineSnapshotRestore {
	return &fleetv1.MachineSnapshotRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.MachineSnapshotRestoreSpec{Target: fleetv1.MachineSnapshotSource{MachineClaimName: claim}, MachineSnapshotName: snapshot}}
}

// TestMachineSnapshotCreateRestoreDelete takes a snapshot of a running persistent VM, restores it
// after the guest wrote more data (the VM is stopped for the rollback and started again), and
// deleting the MachineSnapshot removes the hypervisor snapshot.
func TestMachineSnapshotCreateRestoreDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	ns, vmid := claim.Namespace, vmidOf(claim.Status.VMID)
	g.Eventually(func() infrav1.MachineClaimPhase { return get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseRunning))
	g.Expect(sim.WriteGuestData(vmid, "v1")).To(Succeed())

	snap := newSnapshot("before-upgrade", ns, claim.Name)
	snap.Spec.Description = "before the upgrade"
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseSucceeded))
		g.Expect(got.Status.ReadyToUse).To(BeTrue())
		g.Expect(got.Status.CreationTime).NotTo(BeNil())
		g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue())
		g.Expect(got.OwnerReferences).To(ContainElement(HaveField("Name", claim.Name)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	name := get(g, snap).Status.SnapshotName
	vm, _ := sim.VM(vmid)
	g.Expect(vm.Snapshots).To(Equal([]string{name}))

	g.Expect(sim.WriteGuestData(vmid, "v2")).To(Succeed())
	restore := newRestore("back", ns, claim.Name, snap.Name)
	g.Expect(env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, restore)
		g.Expect(got.Status.Complete).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.RestoreCompleteReason))
		g.Expect(*got.Status.WasRunning).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	vm, _ = sim.VM(vmid)
	g.Expect(vm.GuestData).To(Equal("v1"), "the disks are back at the snapshot")
	g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"), "a VM that ran runs again")
	g.Eventually(func() map[string]string { return get(g, claim).Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(infrav1.RestoreInProgressAnnotation), "the claim is handed back to its run strategy: %+v", get(g, restore).Status)

	// A snapshot restores only onto the VM it was taken of.
	wrong := newRestore("wrong", ns, "another-claim", snap.Name)
	g.Expect(env.Client.Create(ctx, wrong)).To(Succeed())
	g.Eventually(func() string { return conditions.GetReason(get(g, wrong), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(fleetv1.RestoreFailedReason))

	// clusterctl move deletes the source copy of a moved snapshot: the hypervisor snapshot stays.
	moved := newSnapshot("moved", ns, claim.Name)
	g.Expect(env.Client.Create(ctx, moved)).To(Succeed())
	g.Eventually(func() bool { return get(g, moved).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	movedName := get(g, moved).Status.SnapshotName
	got := get(g, moved)
	p := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
	g.Expect(env.Client.Patch(ctx, got, p)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, moved)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(moved), &fleetv1.MachineSnapshot{}))
	},
		30*time.Second, 100*time.Millisecond).Should(BeTrue())

	g.Expect(env.Client.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(snap), &fleetv1.MachineSnapshot{})) },
		30*time.Second, 100*time.Millisecond).Should(BeTrue())
	vm, _ = sim.VM(vmid)
	g.Expect(vm.Snapshots).To(Equal([]string{movedName}),
		"deleting the MachineSnapshot removed its hypervisor snapshot; the moved one's stays")
}

// TestMachineSnapshotStaysInItsNamespace plays a tenant who names another namespace's claim: a
// MachineSnapshot only ever resolves claims of its own namespace, so the other team's VM gets no
// snapshot.
func TestMachineSnapshotStaysInItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	attacker := newNamespace(t)
	snap := newSnapshot("steal", attacker, claim.Name)
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() string { return conditions.GetReason(get(g, snap), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(fleetv1.SourceNotFoundReason))
	g.Consistently(func() []string { vm, _ := sim.VM(vmidOf(claim.Status.VMID)); return vm.Snapshots }, 2*time.Second, 100*time.Millisecond).
		Should(BeEmpty())
	g.Expect(get(g, snap).Status.ReadyToUse).To(BeFalse())
}

// TestMachineSnapshotWaitsForAPausedClaim: while the claim is paused (its Cluster is paused, as
// clusterctl move does, or it carries Cluster API's paused annotation) no snapshot is taken; once
// it resumes, the snapshot is.
func TestMachineSnapshotWaitsForAPausedClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	setPaused := func(on bool) {
		got := get(g, claim)
		p := client.MergeFrom(got.DeepCopy())
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		if on {
			got.Annotations[clusterv1.PausedAnnotation] = ""
		} else {
			delete(got.Annotations, clusterv1.PausedAnnotation)
		}
		g.Expect(env.Client.Patch(ctx, got, p)).To(Succeed())
	}
	setPaused(true)
	g.Eventually(func() bool { return conditions.IsTrue(get(g, claim), infrav1.PausedCondition) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())

	snap := newSnapshot("while-paused", claim.Namespace, claim.Name)
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() string { return conditions.GetMessage(get(g, snap), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(ContainSubstring("is paused"))
	g.Consistently(func() []string { vm, _ := sim.VM(vmidOf(claim.Status.VMID)); return vm.Snapshots }, 2*time.Second, 200*time.Millisecond).
		Should(BeEmpty())

	setPaused(false)
	g.Eventually(func() bool { return get(g, snap).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
}

// TestMachineSnapshotOfAStoppedVMAndRefusals: a stopped VM is restored and stays stopped; a
// snapshot the hypervisor refuses (a disk on storage without snapshots) fails with PVE's words.
func TestMachineSnapshotOfAStoppedVMAndRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyManual) // made and left off
	vmid := vmidOf(claim.Status.VMID)
	g.Expect(vmStatus(sim, claim)()).To(Equal("stopped"))
	g.Expect(sim.WriteGuestData(vmid, "v1")).To(Succeed())

	snap := newSnapshot("cold", claim.Namespace, claim.Name)
	snap.Spec.WithMemory = true // ignored: the VM is off
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() bool { return get(g, snap).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(get(g, snap).Status.WithMemory).To(BeFalse())

	g.Expect(sim.WriteGuestData(vmid, "v2")).To(Succeed())
	restore := newRestore("cold-back", claim.Namespace, claim.Name, snap.Name)
	g.Expect(env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func() bool { return get(g, restore).Status.Complete }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(*get(g, restore).Status.WasRunning).To(BeFalse())
	vm, _ := sim.VM(vmid)
	g.Expect(vm.GuestData).To(Equal("v1"))
	staysOff(t, sim, claim, "a VM that was off stays off after its restore")

	// A disk moved to directory storage in raw format: PVE cannot snapshot it.
	g.Expect(sim.SetVMConfig(vmid, "scsi1", fmt.Sprintf("local:%d/vm-%d-disk-1.raw,size=4G", vmid, vmid))).To(Succeed())
	refused := newSnapshot("refused", claim.Namespace, claim.Name)
	g.Expect(env.Client.Create(ctx, refused)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, refused)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseFailed))
		g.Expect(got.Status.Error).To(ContainSubstring("snapshot feature is not available"))
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.SnapshotFailedReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	// A restore of a failed snapshot fails too, and says why.
	bad := newRestore("from-failed", claim.Namespace, claim.Name, refused.Name)
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func() string { return conditions.GetMessage(get(g, bad), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(ContainSubstring("snapshot feature is not available"))
}

// TestMachineSnapshotFailureDeadline: a snapshot task that hangs (slow storage) fails the snapshot
// once its failureDeadline passes, instead of leaving it InProgress for ever.
func TestMachineSnapshotFailureDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/snapshot", TaskDuration: time.Minute, Count: 1})
	snap := newSnapshot("hung", claim.Namespace, claim.Name)
	snap.Spec.FailureDeadline = &metav1.Duration{Duration: 2 * time.Second}
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseFailed))
		g.Expect(got.Status.Error).To(ContainSubstring("failureDeadline 2s"))
		g.Expect(got.Status.ReadyToUse).To(BeFalse())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
