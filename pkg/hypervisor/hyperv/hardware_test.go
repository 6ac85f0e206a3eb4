package hyperv

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const (
	disksDir   = DefaultVHDDirectory
	backupNet  = "backup"
	lanMAC     = "02:1a:2b:3c:4d:5e"
	backupMAC  = "02:6f:70:81:92:a3"
	serviceMAC = "02:b4:c5:d6:e7:f8"
)

// hardwareSpec is a claim's three NICs and two extra disks, with a seed.
func hardwareSpec() hypervisor.ConfigSpec {
	return hypervisor.ConfigSpec{
		Cores: 2, MemoryMiB: 4096,
		// spec.network is ignored once the NICs are given.
		Network:    &hypervisor.NetworkSpec{Name: "ignored-switch", VLAN: 7},
		ExtraDisks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 20, Bus: "scsi"}, {Name: "wal", SizeGiB: 2}},
		NICs: []hypervisor.NIC{
			{Name: "lan", Bridge: runnerSwitch, VLAN: 42, MAC: lanMAC, Model: "virtio", MTU: 9000},
			{Name: "backup", Bridge: backupNet, MAC: backupMAC},
			{Name: "svc", Bridge: runnerSwitch, VLAN: 100, MAC: serviceMAC},
		},
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: db-0\n", NetworkConfig: "version: 2\n"},
	}
}

func cloneBare(t *testing.T, env *testEnv, name, claimID string) hypervisor.VMRef {
	t.Helper()
	ref, _, err := env.p.Clone(testCtx(t), hypervisor.CloneSpec{
		Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: name,
		Owner: hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: name, ClaimID: claimID},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestConfigureHardware: one Configure gives a new VM the claim's NICs, in order, with their
// names, MACs, switches and VLANs (the adapter New-VM made is the first of them), and its extra
// disks as dynamic VHDX files on SCSI after the boot disk, named by the VM's GUID and the disk's
// name; the seed's DVD drive comes after them. Applying the same spec again adds nothing;
// fewer NICs remove the adapters beyond them.
func TestConfigureHardware(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.AddSwitch("hv1", backupNet)).To(Succeed())
	ref := cloneBare(t, env, "db-0", "claimdb0")
	g.Expect(simVM(env, "hv1", ref.ID).Adapters).To(HaveLen(1), "New-VM's own adapter")

	_, err := env.p.Configure(ctx, ref, hardwareSpec())
	g.Expect(err).NotTo(HaveOccurred())

	vm := simVM(env, "hv1", ref.ID)
	want := []hvsim.HyperVAdapter{
		{Name: "lan", Switch: runnerSwitch, MAC: "021A2B3C4D5E", VLAN: 42, StaticMAC: true},
		{Name: "backup", Switch: backupNet, MAC: "026F708192A3", StaticMAC: true},
		{Name: "svc", Switch: runnerSwitch, MAC: "02B4C5D6E7F8", VLAN: 100, StaticMAC: true},
	}
	g.Expect(vm.Adapters).To(Equal(want))
	g.Expect(vm.Switch).To(Equal(runnerSwitch), "spec.network is not applied over the NICs")
	data := disksDir + `\hyperfleet-` + ref.ID + `-data.vhdx`
	wal := disksDir + `\hyperfleet-` + ref.ID + `-wal.vhdx`
	boot := disksDir + `\` + env.p.diskName("db-0", hypervisor.Ownership{ClaimID: "claimdb0"})
	g.Expect(vm.Disks).To(Equal([]string{boot, data, wal}))
	g.Expect(vm.DiskLUNs).To(Equal([]int{0, 1, 2}), "spec.disks[i] is at LUN i+1")
	for path, size := range map[string]int64{data: 20 << 30, wal: 2 << 30} {
		f, ok := env.hv.File("hv1", path)
		g.Expect(ok).To(BeTrue(), path)
		g.Expect(f.Kind).To(Equal("vhdx"))
		g.Expect(f.Parent).To(BeEmpty(), "a new empty disk, not a differencing disk")
		g.Expect(f.Size).To(Equal(size))
	}
	g.Expect(vm.DVDs).To(HaveLen(1), "the seed")
	files := env.hv.Files("hv1")
	calls := env.hv.Calls()

	// The same spec again (a retried Configure) adds nothing.
	_, err = env.p.Configure(ctx, ref, hardwareSpec())
	g.Expect(err).NotTo(HaveOccurred())
	again := simVM(env, "hv1", ref.ID)
	g.Expect(again.Adapters).To(Equal(want))
	g.Expect(again.Disks).To(Equal(vm.Disks))
	g.Expect(again.DiskLUNs).To(Equal(vm.DiskLUNs))
	g.Expect(env.hv.Files("hv1")).To(Equal(files))
	g.Expect(env.hv.Calls()["hv1/Add-HFDisks"]).To(Equal(calls["hv1/Add-HFDisks"]+1), "the disks were asked for again")

	// Fewer NICs: the adapter beyond them goes.
	spec := hardwareSpec()
	spec.NICs = spec.NICs[:2]
	_, err = env.p.Configure(ctx, ref, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(env, "hv1", ref.ID).Adapters).To(Equal(want[:2]))

	w, err := env.p.hosts["hv1"].getVM(ctx, "read", ref.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string(w.MacAddresses)).To(Equal([]string{"021A2B3C4D5E", "026F708192A3"}))
	g.Expect([]string(w.HardDiskPaths)).To(Equal([]string{boot, data, wal}))
}

// TestConfigureHardwareReplacesTemplateAdapters: a VM with more adapters than the claim's NICs,
// in another order, ends with exactly the NICs, in the claim's order where it adds them.
func TestConfigureHardwareReplacesAdapters(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.AddSwitch("hv1", backupNet)).To(Succeed())
	ref := cloneBare(t, env, "db-1", "claimdb1")
	four := hardwareSpec()
	four.ExtraDisks = nil
	four.NICs = append(four.NICs, hypervisor.NIC{Name: "extra", Bridge: backupNet, MAC: "02:00:00:00:00:99"})
	_, err := env.p.Configure(ctx, ref, four)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(env, "hv1", ref.ID).Adapters).To(HaveLen(4))

	one := hardwareSpec()
	one.ExtraDisks = nil
	one.NICs = []hypervisor.NIC{{Name: "only", Bridge: backupNet, MAC: "02:00:00:00:00:01"}}
	_, err = env.p.Configure(ctx, ref, one)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(env, "hv1", ref.ID).Adapters).To(Equal([]hvsim.HyperVAdapter{
		{Name: "only", Switch: backupNet, MAC: "020000000001", StaticMAC: true},
	}), "the first adapter reused with the new name, MAC, switch and no VLAN; the others removed")
}

// TestExtraDisksGoWithTheVM: deleting the VM removes its extra disks (also after the VHD folder
// setting changed), and one a configuration made but did not attach; a disk someone attached by
// hand, another VM's extra disk and a file in use by another VM stay.
func TestExtraDisksGoWithTheVM(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.AddSwitch("hv1", backupNet)).To(Succeed())
	ref := cloneBare(t, env, "db-2", "claimdb2")
	other := cloneBare(t, env, "db-3", "claimdb3")

	// A disk file of this VM's that a configuration cut short left unattached is made again.
	leftover := disksDir + `\hyperfleet-` + ref.ID + `-data.vhdx`
	g.Expect(env.hv.WriteFile("hv1", leftover, []byte("half-made"))).To(Succeed())
	_, err := env.p.Configure(ctx, ref, hardwareSpec())
	g.Expect(err).NotTo(HaveOccurred())
	f, _ := env.hv.File("hv1", leftover)
	g.Expect(f.Size).To(Equal(int64(20) << 30))
	g.Expect(simVM(env, "hv1", ref.ID).Disks).To(ContainElement(leftover))

	spec := hardwareSpec()
	spec.NICs, spec.Network = nil, &hypervisor.NetworkSpec{Name: backupNet}
	_, err = env.p.Configure(ctx, other, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(env, "hv1", other.ID).Switch).To(Equal(backupNet), "without NICs spec.network applies")

	byHand := `D:\Data\reports.vhdx`
	g.Expect(env.hv.AttachDisk("hv1", ref.ID, byHand, 5)).To(Succeed())
	loose := disksDir + `\hyperfleet-` + ref.ID + `-cache.vhdx`
	g.Expect(env.hv.WriteFile("hv1", loose, nil)).To(Succeed())
	shared := disksDir + `\hyperfleet-` + ref.ID + `-shared.vhdx`
	g.Expect(env.hv.AttachDisk("hv1", other.ID, shared, 1)).To(Succeed())

	_, err = env.p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	for _, gone := range []string{leftover, disksDir + `\hyperfleet-` + ref.ID + `-wal.vhdx`, loose} {
		_, ok := env.hv.File("hv1", gone)
		g.Expect(ok).To(BeFalse(), gone)
	}
	for _, kept := range []string{byHand, shared, disksDir + `\hyperfleet-` + other.ID + `-data.vhdx`, disksDir + `\hyperfleet-` + other.ID + `-wal.vhdx`, templateDisk} {
		_, ok := env.hv.File("hv1", kept)
		g.Expect(ok).To(BeTrue(), kept)
	}

	// The VHD folder of the HypervisorCluster changed since: the attached disks are still known
	// by their names.
	moved := env.provider(t, testInstallation, testCluster, func(c *Config) { c.VHDDirectory = `E:\HyperFleet\Disks` })
	_, err = moved.Delete(ctx, other)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := env.hv.File("hv1", disksDir+`\hyperfleet-`+other.ID+`-data.vhdx`)
	g.Expect(ok).To(BeFalse())
	_, ok = env.hv.File("hv1", shared)
	g.Expect(ok).To(BeTrue(), "named like the first VM's disk, which is gone, but not this VM's: a foreign file")
}

// TestHardwareRefusals: what Hyper-V has no equivalent for, and a switch the host lacks, are
// refused with a clear error and the VM is left as it was.
func TestHardwareRefusals(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneBare(t, env, "db-4", "claimdb4")
	before := simVM(env, "hv1", ref.ID)
	nic := func(mut func(*hypervisor.NIC)) func(*hypervisor.ConfigSpec) {
		return func(s *hypervisor.ConfigSpec) { mut(&s.NICs[0]) }
	}
	disk := func(mut func(*hypervisor.ExtraDisk)) func(*hypervisor.ConfigSpec) {
		return func(s *hypervisor.ConfigSpec) { mut(&s.ExtraDisks[0]) }
	}
	for _, tc := range []struct {
		name   string
		mutate func(*hypervisor.ConfigSpec)
		want   error
		says   string
	}{
		{"firewall", nic(func(n *hypervisor.NIC) { n.Firewall = true }), hypervisor.ErrInvalid, "Hyper-V has no per-adapter firewall"},
		{"emulated NIC model", nic(func(n *hypervisor.NIC) { n.Model = "e1000" }), hypervisor.ErrInvalid, "synthetic network adapters only"},
		{"no switch", nic(func(n *hypervisor.NIC) { n.Bridge = "" }), hypervisor.ErrInvalid, "the bridge is the virtual switch"},
		{"unknown switch", nic(func(n *hypervisor.NIC) { n.Bridge = "vmbr9" }), hypervisor.ErrInvalid, "virtual switch 'vmbr9' of adapter lan does not exist on HV1 (its switches: runners)"},
		{"bad MAC", nic(func(n *hypervisor.NIC) { n.MAC = "01:00:5e:00:00:01" }), hypervisor.ErrInvalid, "not a unicast MAC"},
		{"virtio disk", disk(func(d *hypervisor.ExtraDisk) { d.Bus = "virtio" }), hypervisor.ErrInvalid, "SCSI disks only"},
		{"sata disk", disk(func(d *hypervisor.ExtraDisk) { d.Bus = "sata" }), hypervisor.ErrInvalid, "SCSI disks only"},
		{"storage that cannot name a folder", disk(func(d *hypervisor.ExtraDisk) { d.Storage = `..\x` }), hypervisor.ErrInvalid, "cannot name a Hyper-V directory storage"},
		{"disk name with a path", disk(func(d *hypervisor.ExtraDisk) { d.Name = `..\x` }), hypervisor.ErrInvalid, "lowercase DNS label"},
		{"PCI device", func(s *hypervisor.ConfigSpec) { s.PCIDevices = []hypervisor.PCIDevice{{Mapping: "gpu"}} }, hypervisor.ErrUnsupported, "PCI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := hardwareSpec()
			spec.NICs = spec.NICs[:1]
			tc.mutate(&spec)
			_, err := env.p.Configure(ctx, ref, spec)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err.Error()).To(ContainSubstring(tc.says))
			after := simVM(env, "hv1", ref.ID)
			g.Expect(after.Adapters).To(Equal(before.Adapters))
			g.Expect(after.Disks).To(Equal(before.Disks))
			g.Expect(after.DVDs).To(BeEmpty())
		})
	}
	g := NewWithT(t)
	g.Expect(env.hv.Calls()["hv1/Add-HFDisks"]).To(BeZero())
	g.Expect(env.hv.Calls()["hv1/Set-HFAdapters"]).To(Equal(1), "only the unknown switch reached the host")
}

// TestHardwareNeedsOwnershipAndAVMThatIsOff: the module proves the VM is the caller's, and off,
// before it adds a disk or changes an adapter.
func TestHardwareNeedsOwnershipAndAVMThatIsOff(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneBare(t, env, "db-5", "claimdb5")
	h := env.p.hosts["hv1"]
	intruder := env.provider(t, otherInstall, testCluster)
	adapters := []adapterInput{{Name: "lan", SwitchName: runnerSwitch, MacAddress: "021A2B3C4D5E"}}
	disks := []diskInput{{Name: "data", SizeBytes: 1 << 30, Lun: 1}}
	before := simVM(env, "hv1", ref.ID)

	err := h.call(ctx, "op", fnSetAdapters, setAdaptersInput{ID: ref.ID, Expect: intruder.expect(""), Adapters: adapters}, nil)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	err = h.call(ctx, "op", fnAddDisks, addDisksInput{ID: ref.ID, Expect: env.p.expect("another-claim"), VHDDirectory: disksDir, Disks: disks}, nil)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(simVM(env, "hv1", ref.ID)).To(Equal(before))

	_, err = env.p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	err = h.call(ctx, "op", fnAddDisks, addDisksInput{ID: ref.ID, Expect: env.p.expect(""), VHDDirectory: disksDir, Disks: disks}, nil)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
	err = h.call(ctx, "op", fnSetAdapters, setAdaptersInput{ID: ref.ID, Expect: env.p.expect(""), Adapters: adapters}, nil)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
	g.Expect(simVM(env, "hv1", ref.ID).Adapters).To(Equal(before.Adapters))
	g.Expect(simVM(env, "hv1", ref.ID).Disks).To(Equal(before.Disks))
}

// TestHardwareScriptsFitTheCommandLine: the largest hardware a claim may ask for (8 disks with
// 20-character names, each on a storage of its own with a 63-character name, 8 NICs with 15-character names on 64-character switches, VLAN 4094) and
// the longest claim ID keep each call under cmd.exe's command-line limit.
func TestHardwareScriptsFitTheCommandLine(t *testing.T) {
	g := NewWithT(t)
	p := &Provider{cfg: Config{InstallationID: testInstallation, Cluster: testCluster, ModuleRoot: DefaultModuleRoot, VHDDirectory: DefaultVHDDirectory},
		ownerTag: OwnerTag(testInstallation, testCluster)}
	spec := hypervisor.ConfigSpec{}
	for i := range maxDisks {
		spec.ExtraDisks = append(spec.ExtraDisks, hypervisor.ExtraDisk{Name: strings.Repeat("d", 19) + string(rune('a'+i)), SizeGiB: maxVHDSizeGiB,
			Storage: strings.Repeat("s", 62) + string(rune('a'+i))})
	}
	for i := range maxAdapters {
		spec.NICs = append(spec.NICs, hypervisor.NIC{Name: strings.Repeat("n", 14) + string(rune('a'+i)), Bridge: strings.Repeat("s", 64),
			VLAN: 4094, MAC: "02:ff:ff:ff:ff:f" + string(rune('0'+i))})
	}
	disks, adapters, err := hardwareInputs("op", spec)
	g.Expect(err).NotTo(HaveOccurred())
	expect := p.expect(strings.Repeat("c", 32))
	id := "6f1d3c2a-8e4b-4f0e-9a57-2b1c7d9e4a10"
	for fn, in := range map[string]any{
		fnAddDisks:    addDisksInput{ID: id, Expect: expect, VHDDirectory: p.cfg.VHDDirectory, StorageIndex: DefaultStorageIndex, Disks: disks},
		fnSetAdapters: setAdaptersInput{ID: id, Expect: expect, Adapters: adapters},
	} {
		script, err := callScript(p.cfg.ModuleRoot, fn, in)
		g.Expect(err).NotTo(HaveOccurred())
		line := len(winrmclient.EncodeCommand(script))
		t.Logf("%s: %d of %d characters", fn, line, winrmclient.MaxCommandLine)
		g.Expect(line).To(BeNumerically("<=", winrmclient.MaxCommandLine), fn)
	}
	_, _, err = hardwareInputs("op", hypervisor.ConfigSpec{ExtraDisks: append(spec.ExtraDisks, hypervisor.ExtraDisk{Name: "one-more", SizeGiB: 1})})
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
}
