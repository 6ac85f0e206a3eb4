package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

const guidTemplate = "0e6c1f5a-3b2d-4c8e-9a7f-5d4e3c2b1a09"

// TestGUIDProviderClaimLifecycle: with a provider that assigns GUIDs and finishes every operation
// before returning, a claim gets exactly one VM even when the answer to its clone is lost (the VM
// exists, the claim never heard its ID): the claim finds it by its ownership marks instead of
// making a second one. No VMID is ever asked for, no task is ever polled, the providerID carries
// the GUID, and deleting the claim destroys the VM.
func TestGUIDProviderClaimLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake := newGUIDProvider(hypervisor.Template{Ref: hypervisor.VMRef{Node: "hv1", ID: guidTemplate}, Name: "ubuntu-2404",
		Cores: 2, MemoryMiB: 1024, DiskGiB: 20, BootDisk: "boot"})
	fake.loseCloneAnswers = 1
	startManager(t, testTiming{Sweep: time.Second, OrphanGrace: time.Hour,
		Providers: map[infrav1.ProviderType]connection.ProviderBuilder{infrav1.ProviderHyperV: fake.Builder()}})
	ns := newNamespace(t)
	hc := builder.NewHypervisorCluster("hv", ns).WithEndpoint("https://127.0.0.1:5986/wsman").Build()
	hc.Spec.Provider = infrav1.ProviderHyperV
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())

	claim := builder.NewMachineClaim("guid-vm", ns).WithHypervisorCluster("hv").
		WithTemplate(infrav1.TemplateSource{ID: guidTemplate}).WithResources(4, 4096).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "reason %s: %s",
			conditions.GetReason(got, infrav1.ReadyCondition), conditions.GetMessage(got, infrav1.ReadyCondition))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	vms := fake.VMs()
	g.Expect(vms).To(HaveLen(1), "the lost clone answer must not make a second VM")
	vm := vms[0]
	got := get(g, claim)
	g.Expect(got.Status.VMID).To(Equal(vm.Ref.ID))
	g.Expect(got.Status.Node).To(Equal("hv1"))
	g.Expect(get(g, hc).UID).NotTo(BeEmpty())
	g.Expect(got.Spec.ProviderID).To(Equal(infrav1.ProviderIDPrefix + string(get(g, hc).UID) + "/" + vm.Ref.ID))
	g.Expect(got.Status.Task).To(BeNil())
	g.Expect(vm.State).To(Equal(hypervisor.PowerStateRunning))
	g.Expect(vm.Cores).To(Equal(4))
	g.Expect(vm.MemoryMiB).To(Equal(4096))
	g.Expect(vm.Owner.ClaimName).To(Equal("guid-vm"))
	nextID, polls := fake.Counts()
	g.Expect(nextID).To(BeZero(), "NextID is only for providers with PreallocatedIDs")
	g.Expect(polls).To(BeZero(), "a synchronous provider has no tasks to poll")

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() []hypervisor.VM { return fake.VMs() }, 30*time.Second, 100*time.Millisecond).Should(BeEmpty())
}

// TestClaimForAnotherProviderIsRefused: Proxmox settings on a claim whose HypervisorCluster is
// Hyper-V would be dropped silently; the claim says so instead and no VM is made, and a
// MachineClaimTemplate carrying them says so too.
func TestClaimForAnotherProviderIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake := newGUIDProvider(hypervisor.Template{Ref: hypervisor.VMRef{Node: "hv1", ID: guidTemplate}, Name: "ubuntu-2404", MemoryMiB: 1024})
	startManager(t, testTiming{Sweep: time.Second, OrphanGrace: time.Hour,
		Providers: map[infrav1.ProviderType]connection.ProviderBuilder{infrav1.ProviderHyperV: fake.Builder()}})
	ns := newNamespace(t)
	hc := builder.NewHypervisorCluster("hv", ns).WithEndpoint("https://127.0.0.1:5986/wsman").Build()
	hc.Spec.Provider = infrav1.ProviderHyperV
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())

	claim := builder.NewMachineClaim("pve-only", ns).WithHypervisorCluster("hv").
		WithTemplate(infrav1.TemplateSource{ID: guidTemplate}).WithClone(infrav1.CloneFull, "local-lvm").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.ProviderMismatchReason))
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("spec.proxmox"))
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseFailed))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	// A MachineClaimTemplate with the same settings says so before any claim is made from it.
	tmpl := builder.NewMachineClaimTemplate("pve-only", ns).WithSpec(claim.Spec).Build()
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, tmpl)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.ProviderMismatchReason), "%+v", got.Status.Conditions)
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("spec.proxmox"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func() []hypervisor.VM { return fake.VMs() }, 2*time.Second, 200*time.Millisecond).Should(BeEmpty())
}
