package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestHyperVSnapshotRestoreDelete: a MachineSnapshot with memory of a running persistent claim on
// Hyper-V is a standard checkpoint; a MachineSnapshotRestore stops the VM, applies it and Hyper-V's
// saved state resumes the VM; deleting the MachineSnapshot removes the checkpoint and waits for
// Hyper-V to merge its disk.
func TestHyperVSnapshotRestoreDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentHyperVVM(t, hvsim.HyperVConfig{MergeDuration: 2 * time.Second}, "hv1")
	host, id := claim.Status.Node, claim.Status.VMID

	snap := builder.NewMachineSnapshot("before-upgrade", claim.Namespace, claim.Name)
	snap.Spec.WithMemory = true
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseSucceeded), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.ReadyToUse).To(BeTrue())
		g.Expect(got.Status.WithMemory).To(BeTrue())
		g.Expect(got.Status.Task).To(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	name := get(g, snap).Status.SnapshotName
	g.Expect(sim.Checkpoints(host, id)).To(ConsistOf(And(HaveField("Name", name), HaveField("Kind", "Standard"), HaveField("Memory", true))))

	restore := builder.NewMachineSnapshotRestore("back", claim.Namespace, claim.Name, snap.Name)
	g.Expect(env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, restore)
		g.Expect(got.Status.Complete).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(*got.Status.WasRunning).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(controllertest.HyperVVMState(sim, host, id)).To(Equal(2), "resumed from the checkpoint's saved state")
	g.Eventually(func() map[string]string { return get(g, claim).Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(infrav1.RestoreInProgressAnnotation))

	g.Expect(env.Client.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, snap)
		g.Expect(got.Status.Task).NotTo(BeNil(), "the merge is followed")
		g.Expect(got.Status.Task.ID).To(Equal("merge:" + id))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(sim.Merging(host, id)).To(BeTrue())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(snap), &fleetv1.MachineSnapshot{})) },
		30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(sim.Merging(host, id)).To(BeFalse(), "released once Hyper-V had merged the checkpoint's disk")
	g.Expect(sim.Checkpoints(host, id)).To(BeEmpty())
	g.Expect(controllertest.HyperVVMState(sim, host, id)).To(Equal(2))
}

// TestHyperVMigration: a MachineMigration to a host whose live migration is off fails with
// Hyper-V's refusal and leaves the VM running where it was; once the host accepts migrations a
// second one moves the VM live with its disk (shared-nothing), and the claim's status.node is the
// new host.
func TestHyperVMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentHyperVVM(t, hvsim.HyperVConfig{MoveDuration: time.Second}, "hv1", "hv2")
	source, id := claim.Status.Node, claim.Status.VMID
	target := map[string]string{"hv1": "hv2", "hv2": "hv1"}[source]
	g.Expect(sim.EnableMigration(source, true)).To(Succeed())

	refused := builder.NewMachineMigration("refused", claim.Namespace, claim.Name, target)
	refused.Spec.WithLocalDisks = true
	g.Expect(env.Client.Create(ctx, refused)).To(Succeed())
	got := migrationDone(g, refused)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseFailed))
	g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.MigrationFailedReason))
	g.Expect(got.Status.Error).To(ContainSubstring("Virtual machine migration is not enabled on host"))
	g.Expect(controllertest.HyperVVMState(sim, source, id)).To(Equal(2), "still running on its host")
	g.Expect(sim.VMs(target)).To(BeEmpty())
	g.Eventually(func() map[string]string { return get(g, claim).Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(infrav1.MigrationInProgressAnnotation))

	g.Expect(sim.EnableMigration(target, true)).To(Succeed())
	moved := builder.NewMachineMigration("moved", claim.Namespace, claim.Name, fleetv1.MigrationTargetAny)
	moved.Spec.WithLocalDisks = true
	g.Expect(env.Client.Create(ctx, moved)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, moved)
		g.Expect(got.Status.Task).NotTo(BeNil())
		g.Expect(got.Status.Task.ID).To(HavePrefix("move:" + id + ":" + target + ":"))
		g.Expect(got.Status.Progress).NotTo(BeNil(), "Hyper-V's PercentComplete while the job runs")
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseMigrating))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	got = migrationDone(g, moved)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded), "%+v", got.Status)
	g.Expect(got.Status.SourceHost).To(Equal(source))
	g.Expect(got.Status.TargetHost).To(Equal(target))
	g.Expect(got.Status.Online).To(BeTrue())
	g.Expect(got.Status.Progress).To(Equal(ptr.To(int32(100))))
	g.Eventually(func(g Gomega) {
		c := get(g, claim)
		g.Expect(c.Status.Node).To(Equal(target))
		g.Expect(c.Annotations).NotTo(HaveKey(infrav1.MigrationInProgressAnnotation))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(sim.VMs(source)).To(BeEmpty())
	g.Expect(controllertest.HyperVVMState(sim, target, id)).To(Equal(2), "the same VM, running on its new host")
	g.Consistently(func() int { return controllertest.HyperVVMState(sim, target, id) }, time.Second, 100*time.Millisecond).Should(Equal(2))
}

// TestHyperVMigrationCancelledByDeletion: deleting a MachineMigration while Hyper-V's migration job
// runs stops the job; the VM stays running on its source and the claim is handed back there.
func TestHyperVMigrationCancelledByDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := controllertest.PersistentHyperVVM(t, hvsim.HyperVConfig{MoveDuration: 30 * time.Second}, "hv1", "hv2")
	source, id := claim.Status.Node, claim.Status.VMID
	for _, h := range sim.Names {
		g.Expect(sim.EnableMigration(h, true)).To(Succeed())
	}
	m := builder.NewMachineMigration("cancel-me", claim.Namespace, claim.Name, fleetv1.MigrationTargetAny)
	m.Spec.WithLocalDisks = true
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	g.Eventually(func() *fleetv1.MigrationTask { return get(g, m).Status.Task }, 20*time.Second, 50*time.Millisecond).ShouldNot(BeNil())
	g.Expect(env.Client.Delete(ctx, m)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(m), &fleetv1.MachineMigration{})) },
		20*time.Second, 100*time.Millisecond).Should(BeTrue(), "the stopped job ends long before its 30s")
	moves := sim.Moves(source)
	g.Expect(moves).To(HaveLen(1))
	g.Expect(moves[0].State).To(Equal(8), "Terminated")
	g.Expect(controllertest.HyperVVMState(sim, source, id)).To(Equal(2), "still running on its source")
	g.Eventually(func(g Gomega) {
		c := get(g, claim)
		g.Expect(c.Annotations).NotTo(HaveKey(infrav1.MigrationInProgressAnnotation))
		g.Expect(c.Status.Node).To(Equal(source))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
