package proxmox

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestLifecycle drives one VM from template to deletion through go-proxmox over verified HTTPS and
// checks the simulator's state after every step.
func TestLifecycle(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)

	version, err := p.Verify(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(version).NotTo(BeEmpty())

	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Tags: []string{"runner"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tmpl.Ref).To(Equal(hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}))
	g.Expect(tmpl.BootDisk).To(Equal("scsi0"))
	g.Expect(tmpl.DiskGiB).To(Equal(32))
	g.Expect(tmpl.MemoryMiB).To(Equal(2048))

	id, err := p.NextID(ctx, 0)
	g.Expect(err).NotTo(HaveOccurred())
	ref := hypervisor.VMRef{Node: "pve1", ID: idOf(id)}
	owner := ownerFor(clusterA, "ubuntu-x64-abcde")

	cloned, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: ref, Name: "ubuntu-x64-abcde", Owner: owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cloned).To(Equal(ref), "PVE takes the VMID the caller chose")
	g.Expect(string(task)).To(HavePrefix("UPID:pve1:"))
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())

	// Before any tag write the description identifies the VM.
	vm, err := p.VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Owner).To(Equal(&owner))
	g.Expect(simVM(t, sim, id).Description).To(ContainSubstring("claim-id: id-ubuntu-x64-abcde"))

	userData := "#cloud-config\nruncmd: [echo hello]\n"
	sim.ResetRequests()
	cfgTask, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 4, MemoryMiB: 4096,
		Network: &hypervisor.NetworkSpec{Name: "vmbr0", VLAN: 42}, Tags: []string{"runner", "x64"}, Description: "runner for ubuntu-x64",
		Disk:      &hypervisor.DiskSpec{Name: tmpl.BootDisk, SizeGiB: 40},
		CloudInit: &hypervisor.CloudInitData{UserData: userData, MetaData: "instance-id: i-1\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cfgTask)).To(ContainSubstring(":resize:"), "PVE 9 resizes in a task")
	g.Expect(sim.Requests()["PUT /nodes/{node}/qemu/{vmid}/config"]).To(Equal(1), "hardware and cloud-init in one write")
	g.Expect(waitTaskDone(t, p, cfgTask)).To(Succeed())
	s := simVM(t, sim, id)
	g.Expect(s.Cores).To(Equal(4))
	g.Expect(s.MemoryMiB).To(Equal(4096))
	g.Expect(s.Net["net0"]).To(Equal("virtio=" + p.macFor(ref) + ",bridge=vmbr0,tag=42"))
	g.Expect(s.Tags).To(ConsistOf("hyperfleet", OwnerTag(testInstallation, clusterA), "hf-claim-runners.ubuntu-x64-abcde",
		"hf-id-id-ubuntu-x64-abcde", "runner", "x64"))
	g.Expect(s.Description).To(HavePrefix("runner for ubuntu-x64\n\n```hyperfleet\n"))
	g.Expect(s.Disks["scsi0"]).To(ContainSubstring("size=40G"))
	iso := p.isoVolume(ref)
	g.Expect(s.Disks[DefaultCloudInitDevice]).To(Equal(iso + ",media=cdrom"))
	data, ok := sim.StorageFile("pve1", iso)
	g.Expect(ok).To(BeTrue())
	g.Expect(string(data)).To(ContainSubstring("runcmd: [echo hello]"))

	// Configuring again is harmless: the ISO is replaced, and a larger disk satisfies a smaller request.
	cfgTask, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 4, Disk: &hypervisor.DiskSpec{Name: tmpl.BootDisk, SizeGiB: 20},
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\nruncmd: [echo again]\n", MetaData: "instance-id: i-1\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, cfgTask)).To(Succeed())
	g.Expect(simVM(t, sim, id).Disks["scsi0"]).To(ContainSubstring("size=40G"))
	data, _ = sim.StorageFile("pve1", iso)
	g.Expect(string(data)).To(ContainSubstring("runcmd: [echo again]"))

	task, err = p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(simVM(t, sim, id).Status).To(Equal("running"))
	task, err = p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed(), "starting a running VM is idempotent")

	var addrs []hypervisor.Address
	g.Eventually(func() []hypervisor.Address {
		addrs, err = p.Addresses(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred(), "no error while the agent boots")
		return addrs
	}).WithTimeout(5 * time.Second).WithPolling(5 * time.Millisecond).ShouldNot(BeEmpty())
	g.Expect(addrs).To(ConsistOf(hypervisor.Address{Type: hypervisor.AddressInternalIP, Address: simVM(t, sim, id).IP}),
		"loopback and link-local addresses are skipped")

	task, err = p.Stop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	vm, err = p.VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.State).To(Equal(hypervisor.PowerStateStopped))

	task, err = p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	_, err = p.VM(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
	_, exists := sim.VM(id)
	g.Expect(exists).To(BeFalse())
	g.Eventually(func() bool { _, ok := sim.StorageFile("pve1", iso); return ok }).Should(BeFalse(), "no ISO left behind")
}

// TestDeleteStopsARunningVMFirst guards against the orphan bug of destroying right after posting a
// stop: Delete must await the stop task.
func TestDeleteStopsARunningVMFirst(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{TaskDuration: 30 * time.Millisecond})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := cloneOwned(t, p, 200, ownerFor(clusterA, "busy"))
	task, err := p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())

	task, err = p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	_, exists := sim.VM(vmidOf(ref.ID))
	g.Expect(exists).To(BeFalse())
}

// TestRestartResume starts a clone, drops the provider and finishes with a new one that knows only
// the stored UPID and VMID, as a restarted manager does.
func TestRestartResume(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{TaskDuration: 100 * time.Millisecond})
	ctx := testCtx(t)
	ref := hypervisor.VMRef{Node: "pve1", ID: "300"}
	owner := ownerFor(clusterA, "resumed")

	first := newTestProvider(t, sim, clusterA)
	_, task, err := first.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}, Target: ref, Owner: owner})
	g.Expect(err).NotTo(HaveOccurred())
	first.Close()
	stored := string(task)

	second := newTestProvider(t, sim, clusterA)
	st, err := second.TaskStatus(ctx, "", hypervisor.TaskID(stored))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Done).To(BeFalse(), "the clone is still running")
	g.Expect(waitTaskDone(t, second, hypervisor.TaskID(stored))).To(Succeed())

	vm, err := second.VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Owner).To(Equal(&owner), "the description identifies the untagged clone")
	_, err = second.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(t, sim, vmidOf(ref.ID)).Tags).To(ContainElements("hyperfleet", OwnerTag(testInstallation, clusterA)))
}

func TestTaskStatusRejectsGarbage(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	_, err := p.TaskStatus(testCtx(t), "", "not-a-upid")
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	st, err := p.TaskStatus(testCtx(t), "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Done).To(BeTrue())
	_, err = p.TaskStatus(testCtx(t), "", "UPID:pve1:00001234:00005678:6500000A:qmstart:105:root@pam:")
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
}

func TestTicketLogin(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{Users: map[string]string{"hyperfleet@pve": "correct horse"}})
	ctx := testCtx(t)
	p := newTestProvider(t, sim, clusterA, func(c *Config) {
		c.TokenID, c.TokenSecret = "", ""
		c.Username, c.Password = "hyperfleet@pve", "correct horse"
	})
	_, err := p.Verify(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ref := cloneOwned(t, p, 400, ownerFor(clusterA, "ticket")) // writes need the CSRF token
	g.Expect(simVM(t, sim, vmidOf(ref.ID)).Tags).To(ContainElement(OwnerTag(testInstallation, clusterA)))

	bad := newTestProvider(t, sim, clusterA, func(c *Config) { c.TokenID, c.TokenSecret = "", ""; c.Username, c.Password = "hyperfleet@pve", "wrong" })
	_, err = bad.Verify(ctx)
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
}

func TestTLSVerification(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	ctx := testCtx(t)

	untrusted := newTestProvider(t, sim, clusterA, func(c *Config) { c.CABundle = nil })
	_, err := untrusted.Verify(ctx)
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
	g.Expect(hypervisor.IsRetryable(err)).To(BeFalse())
	var verification *tls.CertificateVerificationError
	g.Expect(errors.As(err, &verification)).To(BeTrue(), "the x509 failure stays reachable: %v", err)

	insecure := newTestProvider(t, sim, clusterA, func(c *Config) { c.CABundle, c.InsecureSkipVerify = nil, true })
	_, err = insecure.Verify(ctx)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestEjectCloudInitRemovesTheSpentSeed: once the join token is spent, the NoCloud ISO holding it
// is ejected and deleted while the VM keeps running; a VM of another installation is refused.
func TestEjectCloudInitRemovesTheSpentSeed(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := cloneOwned(t, p, 420, ownerFor(clusterA, "seeded"))
	_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n# join token: secret\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	task, err := p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	iso := p.isoVolume(ref)
	_, ok := sim.StorageFile("pve1", iso)
	g.Expect(ok).To(BeTrue())

	twin := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	g.Expect(twin.EjectCloudInit(ctx, ref)).To(MatchError(hypervisor.ErrNotOwned))
	_, ok = sim.StorageFile("pve1", iso)
	g.Expect(ok).To(BeTrue(), "another installation cannot remove our seed")

	g.Expect(p.EjectCloudInit(ctx, ref)).To(Succeed())
	// The deletion runs as PVE's task, which is not followed.
	g.Eventually(func() bool { _, ok := sim.StorageFile("pve1", iso); return ok },
		5*time.Second, 20*time.Millisecond).Should(BeFalse(), "the ISO with the spent token is gone from storage")
	vm := simVM(t, sim, vmidOf(ref.ID))
	g.Expect(vm.Disks[DefaultCloudInitDevice]).To(Equal("none,media=cdrom"), "and from the VM")
	g.Expect(vm.Status).To(Equal("running"))
	g.Expect(p.EjectCloudInit(ctx, ref)).To(Succeed(), "again is a no-op")
}

// TestConfigureStartsOnItsOwnWrite: with ConfigSpec.Start and no disk to grow, Configure starts
// the VM right after its config write, whose digest proved the VM the one it read, without reading
// the VM again, and returns the start task. With a disk to grow it leaves the VM stopped and
// returns the resize task: the VM must not start before the resize ends.
func TestConfigureStartsOnItsOwnWrite(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)

	ref := cloneOwned(t, p, 430, ownerFor(clusterA, "started"))
	sim.ResetRequests()
	task, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2, Start: true,
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(task)).To(ContainSubstring(":qmstart:430:"))
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(simVM(t, sim, 430).Status).To(Equal("running"))
	reqs := sim.Requests()
	g.Expect(reqs).NotTo(HaveKey("GET /nodes/{node}/qemu/{vmid}/status/current"), "no read between the write and the start")
	g.Expect(reqs["GET /nodes/{node}/qemu/{vmid}/config"]).To(Equal(1), "the one read that proved the VM ours")

	resized := cloneOwned(t, p, 431, ownerFor(clusterA, "resized"))
	task, err = p.Configure(ctx, resized, hypervisor.ConfigSpec{Start: true, Disk: &hypervisor.DiskSpec{Name: "scsi0", SizeGiB: 40}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(task)).To(ContainSubstring(":resize:431:"))
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(simVM(t, sim, 431).Status).To(Equal("stopped"))
}
