package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestVMHardware: one persistent claim with extra disks gets them on its VM, on the storage the
// claim names or its boot disk's, and loses them with the VM when the claim is deleted.
func TestVMHardware(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways, func(b *builder.MachineClaimBuilder) {
		b.WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 20}, infrav1.ExtraDisk{Name: "wal", SizeGiB: 2, Bus: infrav1.DiskBusVirtIO})
	})
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	vmid := vmidOf(get(g, claim).Status.VMID)
	vm, ok := sim.VM(vmid)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Disks["scsi1"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=data,size=20G$`))
	g.Expect(vm.Disks["virtio0"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=wal,size=2G$`))
	g.Expect(sim.Volumes(vmid)).To(HaveLen(3), "boot disk and two extra disks")

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(sim.Volumes(vmid)).To(BeEmpty(), "the extra disks go with the VM")
}

// TestHardwareTheProviderLacksIsRefused: Hyper-V has no extra disks in HyperFleet; a claim asking
// for them says so and no VM is made, rather than a VM without the disks it was declared with.
func TestHardwareTheProviderLacksIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "hv1")
	startManager(t)
	ns := newNamespace(t)
	hypervCluster(t, ns, "hv", sim)
	claim := builder.NewMachineClaim("disks", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 20}).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.UnsupportedHardwareReason), "conditions: %+v", got.Status.Conditions)
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("extra disks (spec.disks)"))
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseFailed))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func() int { return len(sim.VMs("hv1")) }, time.Second, 200*time.Millisecond).Should(BeZero())
}
