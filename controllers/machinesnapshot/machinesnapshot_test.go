package machinesnapshot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// TestMachineSnapshotStaysInItsNamespace plays a tenant who names another namespace's claim: a
// MachineSnapshot only ever resolves claims of its own namespace, so the other team's VM gets no
// snapshot.
func TestMachineSnapshotStaysInItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentVM(t, infrav1.RunStrategyAlways)
	attacker := controllertest.NewNamespace(t)
	snap := builder.NewMachineSnapshot("steal", attacker, claim.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() string { return conditions.GetReason(controllertest.Get(g, snap), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(fleetv1.SourceNotFoundReason))
	g.Consistently(func() []string { vm, _ := sim.VM(controllertest.VMIDOf(claim.Status.VMID)); return vm.Snapshots }, 2*time.Second, 100*time.Millisecond).
		Should(BeEmpty())
	g.Expect(controllertest.Get(g, snap).Status.ReadyToUse).To(BeFalse())
}

// TestMachineSnapshotWaitsForAPausedClaim: while the claim is paused (its Cluster is paused, as
// clusterctl move does, or it carries Cluster API's paused annotation) no snapshot is taken; once
// it resumes, the snapshot is.
func TestMachineSnapshotWaitsForAPausedClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentVM(t, infrav1.RunStrategyAlways)
	setPaused := func(on bool) {
		got := controllertest.Get(g, claim)
		p := client.MergeFrom(got.DeepCopy())
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		if on {
			got.Annotations[clusterv1.PausedAnnotation] = ""
		} else {
			delete(got.Annotations, clusterv1.PausedAnnotation)
		}
		g.Expect(controllertest.Env.Client.Patch(ctx, got, p)).To(Succeed())
	}
	setPaused(true)
	g.Eventually(func() bool { return conditions.IsTrue(controllertest.Get(g, claim), infrav1.PausedCondition) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())

	snap := builder.NewMachineSnapshot("while-paused", claim.Namespace, claim.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() string { return conditions.GetMessage(controllertest.Get(g, snap), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(ContainSubstring("is paused"))
	g.Consistently(func() []string { vm, _ := sim.VM(controllertest.VMIDOf(claim.Status.VMID)); return vm.Snapshots }, 2*time.Second, 200*time.Millisecond).
		Should(BeEmpty())

	setPaused(false)
	g.Eventually(func() bool { return controllertest.Get(g, snap).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
}

// TestMachineSnapshotOfAStoppedVMAndRefusals: a stopped VM is restored and stays stopped; a
// snapshot the hypervisor refuses (a disk on storage without snapshots) fails with PVE's words.
func TestMachineSnapshotOfAStoppedVMAndRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentVM(t, infrav1.RunStrategyManual) // made and left off
	vmid := controllertest.VMIDOf(claim.Status.VMID)
	g.Expect(controllertest.VMStatus(sim, claim)()).To(Equal("stopped"))
	g.Expect(sim.WriteGuestData(vmid, "v1")).To(Succeed())

	snap := builder.NewMachineSnapshot("cold", claim.Namespace, claim.Name)
	snap.Spec.WithMemory = true // ignored: the VM is off
	g.Expect(controllertest.Env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func() bool { return controllertest.Get(g, snap).Status.ReadyToUse }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(controllertest.Get(g, snap).Status.WithMemory).To(BeFalse())

	g.Expect(sim.WriteGuestData(vmid, "v2")).To(Succeed())
	restore := builder.NewMachineSnapshotRestore("cold-back", claim.Namespace, claim.Name, snap.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func() bool { return controllertest.Get(g, restore).Status.Complete }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(*controllertest.Get(g, restore).Status.WasRunning).To(BeFalse())
	vm, _ := sim.VM(vmid)
	g.Expect(vm.GuestData).To(Equal("v1"))
	controllertest.StaysOff(t, sim, claim, "a VM that was off stays off after its restore")

	// A disk moved to directory storage in raw format: PVE cannot snapshot it.
	g.Expect(sim.SetVMConfig(vmid, "scsi1", fmt.Sprintf("local:%d/vm-%d-disk-1.raw,size=4G", vmid, vmid))).To(Succeed())
	refused := builder.NewMachineSnapshot("refused", claim.Namespace, claim.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, refused)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, refused)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseFailed))
		g.Expect(got.Status.Error).To(ContainSubstring("snapshot feature is not available"))
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.SnapshotFailedReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	// A restore of a failed snapshot fails too, and says why.
	bad := builder.NewMachineSnapshotRestore("from-failed", claim.Namespace, claim.Name, refused.Name)
	g.Expect(controllertest.Env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func() string { return conditions.GetMessage(controllertest.Get(g, bad), fleetv1.ReadyCondition) }, 30*time.Second, 100*time.Millisecond).
		Should(ContainSubstring("snapshot feature is not available"))
}

// TestMachineSnapshotFailureDeadline: a snapshot task that hangs (slow storage) fails the snapshot
// once its failureDeadline passes, instead of leaving it InProgress for ever.
func TestMachineSnapshotFailureDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentVM(t, infrav1.RunStrategyAlways)
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/snapshot", TaskDuration: time.Minute, Count: 1})
	snap := builder.NewMachineSnapshot("hung", claim.Namespace, claim.Name)
	snap.Spec.FailureDeadline = &metav1.Duration{Duration: 2 * time.Second}
	g.Expect(controllertest.Env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseFailed))
		g.Expect(got.Status.Error).To(ContainSubstring("failureDeadline 2s"))
		g.Expect(got.Status.ReadyToUse).To(BeFalse())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
