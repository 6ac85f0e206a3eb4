package proxmox

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestExtraDiskParams: each new disk takes the lowest free slot of its bus, its storage defaults to
// the boot disk's, and a disk the VM already carries (by serial) is never allocated again.
func TestExtraDiskParams(t *testing.T) {
	boot := map[string]string{"scsi0": "local-lvm:vm-100-disk-0,size=32G", "boot": "order=scsi0;net0", "ide3": "local:iso/x.iso,media=cdrom"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range boot {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name  string
		cfg   map[string]string
		disks []hypervisor.ExtraDisk
		want  map[string]any
		err   string
	}{
		{name: "defaults: scsi on the boot disk's storage", cfg: boot,
			disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 20}},
			want:  map[string]any{"scsi1": "local-lvm:20,serial=data"}},
		{name: "buses and storages", cfg: boot,
			disks: []hypervisor.ExtraDisk{{Name: "a", SizeGiB: 1, Bus: "virtio", Storage: "ceph"}, {Name: "b", SizeGiB: 2, Bus: "sata"}, {Name: "c", SizeGiB: 3}},
			want:  map[string]any{"virtio0": "ceph:1,serial=a", "sata0": "local-lvm:2,serial=b", "scsi1": "local-lvm:3,serial=c"}},
		{name: "taken slots are skipped", cfg: with(map[string]string{"scsi1": "local-lvm:vm-100-disk-1,size=1G", "unused0": "local-lvm:vm-100-disk-9"}),
			disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 5}},
			want:  map[string]any{"scsi2": "local-lvm:5,serial=data"}},
		{name: "a disk made by an earlier attempt is kept", cfg: with(map[string]string{"scsi1": "local-lvm:vm-100-disk-1,serial=data,size=20G"}),
			disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 20}, {Name: "logs", SizeGiB: 4}},
			want:  map[string]any{"scsi2": "local-lvm:4,serial=logs"}},
		{name: "a bigger size never resizes an existing disk", cfg: with(map[string]string{"scsi1": "local-lvm:vm-100-disk-1,serial=data,size=20G"}),
			disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 200}},
			want:  map[string]any{}},
		{name: "full bus", cfg: with(map[string]string{"sata0": "x:1", "sata1": "x:1", "sata2": "x:1", "sata3": "x:1", "sata4": "x:1", "sata5": "x:1"}),
			disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 1, Bus: "sata"}}, err: "every sata slot"},
		{name: "unknown bus", cfg: boot, disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 1, Bus: "ide"}}, err: "bus"},
		{name: "name with a separator", cfg: boot, disks: []hypervisor.ExtraDisk{{Name: "a,b", SizeGiB: 1}}, err: "DNS label"},
		{name: "no storage to default to", cfg: map[string]string{}, disks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 1}}, err: "no storage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := extraDiskParams(tc.cfg, tc.disks)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// TestExtraDisksOnTheSimulator: Configure allocates the disks on the simulated storage; a second
// Configure with the same spec adds nothing; destroying the VM frees every volume it had.
func TestExtraDisksOnTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ref := cloneOwned(t, p, 4100, ownerFor(clusterA, "disks"))
	spec := hypervisor.ConfigSpec{ExtraDisks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 20}, {Name: "scratch", SizeGiB: 4, Bus: "virtio"}}}
	for range 2 {
		task, err := p.Configure(ctx, ref, spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(task).To(BeEmpty())
	}
	vm := simVM(t, sim, 4100)
	g.Expect(vm.Disks["scsi1"]).To(MatchRegexp(`^local-lvm:vm-4100-disk-\d+,serial=data,size=20G$`))
	g.Expect(vm.Disks["virtio0"]).To(MatchRegexp(`^local-lvm:vm-4100-disk-\d+,serial=scratch,size=4G$`))
	g.Expect(vm.Disks).NotTo(HaveKey("scsi2"), "the second Configure adds no disk")
	g.Expect(vm.Disks).NotTo(HaveKey("unused0"), "and replaces none")
	g.Expect(sim.Volumes(4100)).To(HaveLen(3), "the linked clone's disk and two new ones")

	task, err := p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(sim.Volumes(4100)).To(BeEmpty(), "destroying the VM frees its extra disks")
}

// TestNICParams: every NIC becomes netN in order with its MAC, bridge, firewall flag, MTU and VLAN;
// the template's NICs beyond the claim's are deleted.
func TestNICParams(t *testing.T) {
	cfg := map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "net1": "e1000=BC:24:11:00:00:02,bridge=vmbr9", "net2": "virtio=BC:24:11:00:00:03,bridge=vmbr0", "netdev": "x"}
	cases := []struct {
		name   string
		nics   []hypervisor.NIC
		want   map[string]any
		remove []string
		err    string
	}{
		{name: "one NIC replaces the template's three", nics: []hypervisor.NIC{{MAC: "02:aa:bb:cc:dd:ee"}},
			want: map[string]any{"net0": "virtio=02:AA:BB:CC:DD:EE,bridge=vmbr0"}, remove: []string{"net1", "net2"}},
		{name: "every option", nics: []hypervisor.NIC{
			{MAC: "02:00:00:00:00:01", Bridge: "vmbr1", VLAN: 42, Model: "e1000e", Firewall: true, MTU: 9000},
			{MAC: "02:00:00:00:00:02", Bridge: "vmbr2"},
			{MAC: "02:00:00:00:00:03", Firewall: true},
		}, want: map[string]any{
			"net0": "e1000e=02:00:00:00:00:01,bridge=vmbr1,firewall=1,mtu=9000,tag=42",
			"net1": "virtio=02:00:00:00:00:02,bridge=vmbr2",
			"net2": "virtio=02:00:00:00:00:03,bridge=vmbr0,firewall=1",
		}},
		{name: "multicast MAC", nics: []hypervisor.NIC{{MAC: "01:00:00:00:00:01"}}, err: "not a unicast MAC"},
		{name: "bridge with a separator", nics: []hypervisor.NIC{{MAC: "02:00:00:00:00:01", Bridge: "vmbr0,tag=1"}}, err: "separator"},
		{name: "MTU too big", nics: []hypervisor.NIC{{MAC: "02:00:00:00:00:01", MTU: 70000}}, err: "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, remove, err := nicParams(cfg, tc.nics)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			g.Expect(remove).To(Equal(tc.remove))
		})
	}
}

// TestPCIParams: each device is hostpciN by its mapping, never by a raw host address.
func TestPCIParams(t *testing.T) {
	g := NewWithT(t)
	got, err := pciParams([]hypervisor.PCIDevice{{Mapping: "gpu", PCIe: true, PrimaryGPU: true}, {Mapping: "nvme_a"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]any{"hostpci0": "mapping=gpu,pcie=1,x-vga=1", "hostpci1": "mapping=nvme_a"}))
	_, err = pciParams([]hypervisor.PCIDevice{{Mapping: "gpu,host=0000:01:00.0"}})
	g.Expect(err).To(MatchError(ContainSubstring("not a PVE configuration ID")))
}

// TestPCIPassthroughOnTheSimulator: a VM with a mapped device starts on a node that has the
// mapping; on a node without it the start fails with PVE's error, and the VM reports the device
// as a local resource, so it is not live-migratable.
func TestPCIPassthroughOnTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	inv := pvesim.DefaultInventory()
	inv.PCIMappings = []pvesim.PCIMappingSpec{{ID: "gpu", Nodes: []string{"pve1"}}}
	sim := startSim(t, pvesim.Config{Inventory: inv})
	p := newTestProvider(t, sim, clusterA)
	spec := hypervisor.ConfigSpec{PCIDevices: []hypervisor.PCIDevice{{Mapping: "gpu", PCIe: true}}}

	ref := cloneOwned(t, p, 4200, ownerFor(clusterA, "gpu"))
	_, err := p.Configure(ctx, ref, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(t, sim, 4200).Config["hostpci0"]).To(Equal("mapping=gpu,pcie=1"))
	task, err := p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(simVM(t, sim, 4200).Status).To(Equal("running"))
	m, err := p.CheckMigration(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.LocalResources).To(ContainElement("hostpci0"))

	// Another mapping that exists on no node of the cluster.
	ref2 := cloneOwned(t, p, 4201, ownerFor(clusterA, "nogpu"))
	_, err = p.Configure(ctx, ref2, hypervisor.ConfigSpec{PCIDevices: []hypervisor.PCIDevice{{Mapping: "fpga"}}})
	g.Expect(err).NotTo(HaveOccurred())
	task, err = p.Start(ctx, ref2)
	if err == nil {
		err = waitTaskDone(t, p, task)
	}
	g.Expect(err).To(MatchError(ContainSubstring("PCI device mapping not found for 'fpga'")))
	g.Expect(simVM(t, sim, 4201).Status).To(Equal("stopped"))
}

// TestPCIMappingNodes lists the cluster's PCI resource mappings with the nodes that have a device
// for each; a token without any Mapping privilege sees none, as PVE lists only the mappings it
// may audit or use.
func TestPCIMappingNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	inv := pvesim.DefaultInventory()
	inv.PCIMappings = []pvesim.PCIMappingSpec{{ID: "gpu", Nodes: []string{"pve3", "pve1"}}, {ID: "nvme", Nodes: []string{"pve2"}}}
	sim := startSim(t, pvesim.Config{Inventory: inv})
	got, err := newTestProvider(t, sim, clusterA).PCIMappingNodes(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string][]string{"gpu": {"pve1", "pve3"}, "nvme": {"pve2"}}))

	for privs, want := range map[string]int{"VM.Audit": 0, "Mapping.Use": 2, "Mapping.Audit": 2} {
		sim := startSim(t, pvesim.Config{Inventory: inv, Tokens: []pvesim.Token{{ID: pvesim.TestTokenID, Secret: pvesim.TestTokenSecret,
			Privileges: []string{"VM.Audit", "Sys.Audit", privs}}}})
		got, err := newTestProvider(t, sim, clusterA).PCIMappingNodes(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(want), "a token holding %s", privs)
	}
}
