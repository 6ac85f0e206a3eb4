package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestHyperVClaimLifecycle: a HypervisorCluster of two simulated Hyper-V hosts becomes Available
// through HyperFleet's WinRM client and the WS-Man simulator, and a MachineClaim on it gets a
// linked clone with its seed, starts (the guest reads its user-data), reports its addresses, and
// goes with its disk and seed when the claim is deleted. Hyper-V assigns the VM's GUID, and every
// operation is synchronous: the claim never holds a task.
func TestHyperVClaimLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	booted := make(chan hvsim.HyperVBootVM, 1)
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{PS51Quirks: true, BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		select {
		case booted <- vm:
		default:
			t.Errorf("VM %s booted again", vm.Name)
		}
		<-ctx.Done()
		return nil
	}}, "hv1", "hv2")
	foreign, err := sim.AddVM("hv1", "payroll", "", true)
	g.Expect(err).NotTo(HaveOccurred())
	startManager(t)
	ns := newNamespace(t)
	hc := hypervCluster(t, ns, "hv", sim)

	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue(), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Nodes).To(Equal(int32(2)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	bootstrapSecret(t, ns, "vm-h-userdata", controllertest.UserData)
	claim := builder.NewMachineClaim("vm-h", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithBootstrapSecret("vm-h-userdata").WithResources(2, 2048).WithDiskGiB(40).WithNetwork(hvsim.HyperVSwitch, 42).
		WithTags("ci").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "conditions: %+v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	got := get(g, claim)
	g.Expect(got.Status.VMID).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`))
	g.Expect(got.Spec.ProviderID).To(HaveSuffix("/" + got.Status.VMID))
	g.Expect(got.Status.Addresses).NotTo(BeEmpty())
	var guest hvsim.HyperVBootVM
	g.Eventually(booted).Should(Receive(&guest))
	g.Expect(guest.ID).To(Equal(got.Status.VMID))
	g.Expect(string(guest.UserData)).NotTo(BeEmpty())

	var vm hvsim.HyperVVM
	for _, v := range sim.VMs(got.Status.Node) {
		if v.ID == got.Status.VMID {
			vm = v
		}
	}
	g.Expect(vm.State).To(Equal(2), "running")
	g.Expect(vm.CPUs).To(Equal(2))
	g.Expect(vm.MemoryMiB).To(Equal(int64(2048)))
	g.Expect(vm.Switch).To(Equal(hvsim.HyperVSwitch))
	g.Expect(vm.VLAN).To(Equal(42))
	g.Expect(vm.Notes).To(ContainSubstring("claim: " + ns + "/vm-h"))
	g.Expect(vm.Notes).To(ContainSubstring("tags: ci"))
	g.Expect(vm.Disks).To(HaveLen(1))
	disk, ok := sim.File(got.Status.Node, vm.Disks[0])
	g.Expect(ok).To(BeTrue())
	g.Expect(disk.Parent).To(Equal(hvsim.HyperVTemplateDisk), "a linked clone")

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	for _, h := range sim.Names {
		for _, v := range sim.VMs(h) {
			g.Expect(v.ID).To(Equal(foreign), "only the foreign VM is left")
		}
		for _, f := range sim.Files(h) {
			g.Expect(strings.Contains(f, `\Disks\`) || strings.Contains(f, `\Seeds\`)).To(BeFalse(), "left behind: %s", f)
		}
	}
	g.Expect(sim.VMs("hv1")).To(HaveLen(1))
}

// TestHyperVPoweredOffVMIsSwept: the guest powers itself off after its job, and the sweep's one
// inventory call per host finds it, deletes the VM with its disk and releases the claim.
func TestHyperVPoweredOffVMIsSwept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	powerOff := make(chan func(), 1)
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		select {
		case powerOff <- vm.PowerOff:
		default:
			t.Errorf("VM %s booted again", vm.Name)
		}
		<-ctx.Done()
		return nil
	}}, "hv1")
	startManager(t)
	ns := newNamespace(t)
	hypervCluster(t, ns, "hv", sim)
	claim := builder.NewMachineClaim("vm-s", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithNetwork(hvsim.HyperVSwitch, 0).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	var off func()
	g.Eventually(powerOff).Should(Receive(&off))
	poweredOff := time.Now()
	off()
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	t.Logf("stopped Hyper-V VM and its claim removed %s after power-off (sweep interval 1s)", time.Since(poweredOff).Round(10*time.Millisecond))
	g.Expect(sim.VMs("hv1")).To(BeEmpty())
	for _, f := range sim.Files("hv1") {
		g.Expect(strings.Contains(f, `\Disks\`) || strings.Contains(f, `\Seeds\`)).To(BeFalse(), "left behind: %s", f)
	}
}
