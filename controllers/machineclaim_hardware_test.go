package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestVMHardware: one persistent claim with extra disks and two NICs, one with static IPv4 and
// IPv6 addresses and resolvers: the VM gets the disks (on the storage of its boot disk), the NICs
// with the claim's bridges, VLAN, firewall flag and MTU (the template's NIC replaced), the guest
// boots with the addresses from its seed's network-config and the claim's status shows them.
// Deleting the claim removes the VM's disks from storage.
func TestVMHardware(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways, func(b *builder.MachineClaimBuilder) {
		b.WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 20}, infrav1.ExtraDisk{Name: "wal", SizeGiB: 2, Bus: infrav1.DiskBusVirtIO}).
			WithNICs(infrav1.NIC{Name: "lan", Bridge: "vmbr1", VLAN: ptr.To[int32](42), Firewall: true, MTU: ptr.To[int32](9000),
				IPv4: &infrav1.StaticAddress{Address: "192.0.2.10/24", Gateway: "192.0.2.1"},
				IPv6: &infrav1.StaticAddress{Address: "2001:db8::10/64", Gateway: "2001:db8::1"}},
				infrav1.NIC{Name: "backup", Model: "e1000e"}).
			WithDNS([]string{"192.0.2.53"}, "example.org")
	})
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Addresses).To(ContainElements(
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "192.0.2.10"},
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "2001:db8::10"}))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	vmid := vmidOf(get(g, claim).Status.VMID)
	vm, ok := sim.VM(vmid)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Disks["scsi1"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=data,size=20G$`))
	g.Expect(vm.Disks["virtio0"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=wal,size=2G$`))
	g.Expect(sim.Volumes(vmid)).To(HaveLen(3), "boot disk and two extra disks")
	g.Expect(vm.Net).To(HaveLen(2))
	g.Expect(vm.Net["net0"]).To(MatchRegexp(`^virtio=02:[0-9A-F:]{14},bridge=vmbr1,firewall=1,mtu=9000,tag=42$`))
	g.Expect(vm.Net["net1"]).To(MatchRegexp(`^e1000e=02:[0-9A-F:]{14},bridge=vmbr0$`))

	// What the guest read: the seed's network-config names each NIC by the MAC it has.
	iso := strings.TrimSuffix(vm.Disks[proxmox.DefaultCloudInitDevice], ",media=cdrom")
	seed, ok := sim.StorageFile(vm.Node, iso)
	g.Expect(ok).To(BeTrue())
	files, err := pvesim.ReadNoCloudSeed(seed)
	g.Expect(err).NotTo(HaveOccurred())
	netcfg := string(files["network-config"])
	lanMAC := strings.ToLower(strings.TrimPrefix(strings.Split(vm.Net["net0"], ",")[0], "virtio="))
	g.Expect(netcfg).To(MatchRegexp(`macaddress: "?` + lanMAC + `"?\n`))
	g.Expect(netcfg).To(ContainSubstring("- 192.0.2.10/24"))
	g.Expect(netcfg).To(ContainSubstring("via: 192.0.2.1"))
	g.Expect(netcfg).To(ContainSubstring("- 192.0.2.53"))
	g.Expect(netcfg).To(ContainSubstring("set-name: backup"))

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
