package machineclaim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestVMHardware: one persistent claim with extra disks and three NICs: one with static IPv4 and
// IPv6 addresses and resolvers, one on DHCP, one whose address comes from a Cluster API IPAM pool.
// The test plays the IPAM provider. The claim makes an IPAddressClaim and waits for it; an
// IPAddress made for another claim, and one in another namespace, are never used even when the
// IPAddressClaim names them. Once the right IPAddress exists the VM is made with the disks (on the
// storage of its boot disk) and the NICs (bridges, VLAN, firewall flag, MTU; the template's NIC
// replaced), the guest boots with the addresses from its seed's network-config and the claim's
// status shows them. Deleting the claim removes the VM's disks from storage and releases the
// IPAddressClaim.
func TestVMHardware(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	pool := infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "services"}
	claim := builder.NewMachineClaim("db-0", ns).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
		WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 20}, infrav1.ExtraDisk{Name: "wal", SizeGiB: 2, Bus: infrav1.DiskBusVirtIO}).
		WithNICs(infrav1.NIC{Name: "lan", Bridge: "vmbr1", VLAN: ptr.To[int32](42), Firewall: true, MTU: ptr.To[int32](9000),
			IPv4: &infrav1.StaticAddress{Address: "192.0.2.10/24", Gateway: "192.0.2.1"},
			IPv6: &infrav1.StaticAddress{Address: "2001:db8::10/64", Gateway: "2001:db8::1"}},
			infrav1.NIC{Name: "backup", Model: "e1000e"},
			infrav1.NIC{Name: "svc", Bridge: "vmbr2", IPv4PoolRef: &pool}).
		WithDNS([]string{"192.0.2.53"}, "example.org").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())

	// The claim asks the pool for an address, and makes no VM before it has it.
	ipClaim := &ipamv1.IPAddressClaim{}
	ipClaimKey := client.ObjectKey{Namespace: ns, Name: "db-0-svc-ipv4"}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, ipClaimKey, ipClaim)).To(Succeed())
		g.Expect(conditions.GetReason(get(g, claim), infrav1.ReadyCondition)).To(Equal(infrav1.WaitingForIPAddressReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(metav1.IsControlledBy(ipClaim, get(g, claim))).To(BeTrue(), "the IPAddressClaim is owned by the claim")
	g.Expect(ipClaim.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name}))

	ipAddress := func(ns, name, claimName, address string) {
		g.Expect(env.Client.Create(ctx, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: claimName}, PoolRef: ipClaim.Spec.PoolRef,
				Address: address, Prefix: ptr.To[int32](24), Gateway: "198.51.100.1"}})).To(Succeed())
	}
	answer := func(addressName string) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, ipClaimKey, ipClaim); err != nil {
				return err
			}
			ipClaim.Status.AddressRef.Name = addressName
			return env.Client.Status().Update(ctx, ipClaim)
		})).To(Succeed())
	}
	noVM := func(why string) {
		g.Consistently(func() []pvesim.VM { return ownedVMs(sim) }, time.Second, 100*time.Millisecond).Should(BeEmpty(), why)
	}

	// The attacker's answers: an address allocated to another claim in this namespace, and one in
	// another namespace made out for this very IPAddressClaim.
	ipAddress(ns, "stolen", "web-0-svc-ipv4", "198.51.100.66")
	answer("stolen")
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.IPAddressInvalidReason))
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring(`made for IPAddressClaim "web-0-svc-ipv4"`))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	noVM("an IPAddress of another claim is never used")
	other := newNamespace(t)
	ipAddress(other, "foreign", "db-0-svc-ipv4", "198.51.100.77")
	answer("foreign")
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.WaitingForIPAddressReason))
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("does not exist in namespace " + ns))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	noVM("an IPAddress in another namespace is never used")

	// The IPAM provider's real answer.
	ipAddress(ns, "services-198-51-100-7", "db-0-svc-ipv4", "198.51.100.7")
	answer("services-198-51-100-7")
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Addresses).To(ContainElements(
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "192.0.2.10"},
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "2001:db8::10"},
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "198.51.100.7"}))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	got := get(g, claim)
	g.Expect(got.Status.Addresses).NotTo(ContainElement(HaveField("Address", Or(Equal("198.51.100.66"), Equal("198.51.100.77")))))
	vmid := vmidOf(got.Status.VMID)
	vm, ok := sim.VM(vmid)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Disks["scsi1"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=data,size=20G$`))
	g.Expect(vm.Disks["virtio0"]).To(MatchRegexp(`^local-lvm:vm-\d+-disk-\d+,serial=wal,size=2G$`))
	g.Expect(sim.Volumes(vmid)).To(HaveLen(3), "boot disk and two extra disks")
	g.Expect(vm.Net).To(HaveLen(3))
	g.Expect(vm.Net["net0"]).To(MatchRegexp(`^virtio=02:[0-9A-F:]{14},bridge=vmbr1,firewall=1,mtu=9000,tag=42$`))
	g.Expect(vm.Net["net1"]).To(MatchRegexp(`^e1000e=02:[0-9A-F:]{14},bridge=vmbr0$`))
	g.Expect(vm.Net["net2"]).To(MatchRegexp(`^virtio=02:[0-9A-F:]{14},bridge=vmbr2$`))

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
	g.Expect(netcfg).To(ContainSubstring("- 198.51.100.7/24"))
	g.Expect(netcfg).To(ContainSubstring("via: 198.51.100.1"))

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(sim.Volumes(vmid)).To(BeEmpty(), "the extra disks go with the VM")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, ipClaimKey, ipClaim))).To(BeTrue(), "the address goes back to the pool")
}

// TestHyperVClaimGetsDisksAndNICs: on Hyper-V a claim's extra disks become dynamic VHDX files on
// SCSI after the boot disk and its NICs the VM's network adapters, in order, named after them,
// with the MACs the seed's network-config names them by, on their switches and VLANs (the
// adapter New-VM made is the first of them). Deleting the claim removes the disks with the VM.
func TestHyperVClaimGetsDisksAndNICs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	booted := make(chan hvsim.HyperVBootVM, 1)
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		select {
		case booted <- vm:
		default:
		}
		<-ctx.Done()
		return nil
	}}, "hv1")
	g.Expect(sim.AddSwitch("hv1", "backup")).To(Succeed())
	startManager(t)
	ns := newNamespace(t)
	hypervCluster(t, ns, "hv", sim)
	claim := builder.NewMachineClaim("db-h", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithPersistent(infrav1.RunStrategyAlways).
		WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 20}, infrav1.ExtraDisk{Name: "wal", SizeGiB: 2}).
		WithNICs(infrav1.NIC{Name: "lan", Bridge: hvsim.HyperVSwitch, VLAN: ptr.To[int32](42), MTU: ptr.To[int32](9000),
			IPv4: &infrav1.StaticAddress{Address: "192.0.2.10/24", Gateway: "192.0.2.1"}},
			infrav1.NIC{Name: "backup", Bridge: "backup"}).
		WithDNS([]string{"192.0.2.53"}).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

	got := get(g, claim)
	var vm hvsim.HyperVVM
	for _, v := range sim.VMs("hv1") {
		if v.ID == got.Status.VMID {
			vm = v
		}
	}
	g.Expect(vm.ID).NotTo(BeEmpty())
	dir := `C:\ProgramData\HyperFleet\Disks\hyperfleet-` + got.Status.VMID
	g.Expect(vm.Disks).To(HaveLen(3))
	g.Expect(vm.Disks[1:]).To(Equal([]string{dir + "-data.vhdx", dir + "-wal.vhdx"}))
	g.Expect(vm.DiskLUNs).To(Equal([]int{0, 1, 2}))
	for path, size := range map[string]int64{dir + "-data.vhdx": 20 << 30, dir + "-wal.vhdx": 2 << 30} {
		f, ok := sim.File("hv1", path)
		g.Expect(ok).To(BeTrue(), path)
		g.Expect(f.Size).To(Equal(size), path)
	}
	g.Expect(vm.Adapters).To(HaveLen(2))
	g.Expect(vm.Adapters[0]).To(MatchFields(IgnoreExtras, Fields{"Name": Equal("lan"), "Switch": Equal(hvsim.HyperVSwitch), "VLAN": Equal(42), "StaticMAC": BeTrue()}))
	g.Expect(vm.Adapters[1]).To(MatchFields(IgnoreExtras, Fields{"Name": Equal("backup"), "Switch": Equal("backup"), "VLAN": Equal(0), "StaticMAC": BeTrue()}))

	var guest hvsim.HyperVBootVM
	g.Eventually(booted).Should(Receive(&guest))
	netcfg := string(guest.NetworkConfig)
	for _, a := range vm.Adapters {
		mac := strings.ToLower(a.MAC[0:2] + ":" + a.MAC[2:4] + ":" + a.MAC[4:6] + ":" + a.MAC[6:8] + ":" + a.MAC[8:10] + ":" + a.MAC[10:12])
		g.Expect(netcfg).To(MatchRegexp(`(?m)^  `+a.Name+`:\n(?:    .*\n)*?      macaddress: "?`+mac+`"?$`), "the guest names adapter %s by its MAC", a.Name)
	}
	g.Expect(netcfg).To(ContainSubstring("- 192.0.2.10/24"))
	g.Expect(netcfg).To(ContainSubstring("mtu: 9000"), "the MTU is the guest's to set")

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(sim.VMs("hv1")).To(BeEmpty())
	for _, f := range sim.Files("hv1") {
		g.Expect(strings.Contains(f, `\Disks\`)).To(BeFalse(), "left behind: %s", f)
	}
}

// TestHyperVRefusesHardwareItLacks: a NIC asking for Proxmox's firewall is refused on Hyper-V with
// reason UnsupportedHardware and a clear message before any VM is made, instead of a VM without
// the protection it was declared with.
func TestHyperVRefusesHardwareItLacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "hv1")
	startManager(t)
	ns := newNamespace(t)
	hypervCluster(t, ns, "hv", sim)
	claim := builder.NewMachineClaim("fw", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
		WithNICs(infrav1.NIC{Name: "lan", Bridge: hvsim.HyperVSwitch, Firewall: true}).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.UnsupportedHardwareReason), "conditions: %+v", got.Status.Conditions)
		g.Expect(conditions.GetMessage(got, infrav1.ReadyCondition)).To(ContainSubstring("Hyper-V has no per-adapter firewall"))
		g.Expect(got.Status.VMID).To(BeEmpty())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func() []hvsim.HyperVVM { return sim.VMs("hv1") }, 2*time.Second, 200*time.Millisecond).
		Should(BeEmpty(), "refused before any VM is made")
}
