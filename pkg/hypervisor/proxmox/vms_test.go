package proxmox

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// startOwned clones, configures and starts an owned VM and waits for its guest agent.
func startOwned(t *testing.T, sim *pvesim.Simulator, p *Provider, vmid int) hypervisor.VMRef {
	t.Helper()
	g := NewWithT(t)
	ref := cloneOwned(t, p, vmid, ownerFor(clusterA, "vm-"+time.Now().Format("150405.000")))
	task, err := p.Start(testCtx(t), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Eventually(func() ([]hypervisor.Address, error) { return p.Addresses(testCtx(t), ref) }, 5*time.Second, 10*time.Millisecond).ShouldNot(BeEmpty())
	return ref
}

// TestGuestExec runs commands in an owned VM's guest through agent/exec and exec-status.
func TestGuestExec(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 300)

	pid, err := p.GuestExec(ctx, ref, []string{"echo", "hello", "world"})
	g.Expect(err).NotTo(HaveOccurred())
	st, err := p.GuestExecStatus(ctx, ref, pid)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(hypervisor.ExecStatus{Exited: true, Stdout: "hello world\n"}))
	g.Expect(sim.GuestExecs(vmidOf(ref.ID))).To(HaveLen(1))
	g.Expect(sim.GuestExecs(vmidOf(ref.ID))[0].Command).To(Equal([]string{"echo", "hello", "world"}))

	pid, err = p.GuestExec(ctx, ref, []string{"sleep", "0.2"})
	g.Expect(err).NotTo(HaveOccurred())
	st, err = p.GuestExecStatus(ctx, ref, pid)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Exited).To(BeFalse(), "still sleeping")
	g.Eventually(func() bool { st, _ := p.GuestExecStatus(ctx, ref, pid); return st.Exited }, 2*time.Second, 20*time.Millisecond).Should(BeTrue())

	pid, err = p.GuestExec(ctx, ref, []string{"false"})
	g.Expect(err).NotTo(HaveOccurred())
	st, err = p.GuestExecStatus(ctx, ref, pid)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.ExitCode).To(Equal(1))

	_, err = p.GuestExec(ctx, ref, []string{"/no/such/program"})
	g.Expect(err).To(MatchError(ContainSubstring("No such file or directory")))

	// A stopped VM's agent does not answer: busy, worth retrying once it runs.
	task, err := p.Stop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	_, err = p.GuestExec(ctx, ref, []string{"true"})
	g.Expect(errors.Is(err, hypervisor.ErrBusy)).To(BeTrue(), "%v", err)
}

// TestGuestExecWithoutAgent: a VM without a guest agent configured gets PVE's "No QEMU guest
// agent configured", classified ErrNoGuestAgent (retrying will not help).
func TestGuestExecWithoutAgent(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 301)
	// A person removes the agent from the config on the hypervisor side.
	g.Expect(sim.SetVMConfig(vmidOf(ref.ID), "agent", "")).To(Succeed())

	_, err := p.GuestExec(ctx, ref, []string{"true"})
	g.Expect(errors.Is(err, hypervisor.ErrNoGuestAgent)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("No QEMU guest agent configured")))
}

// TestGuestExecRefusesForeignVMs plays an attacker who names someone else's VM: no command is
// sent into a VM HyperFleet does not own.
func TestGuestExecRefusesForeignVMs(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	foreign := hypervisor.VMRef{Node: "pve1", ID: idOf(foreignRunning)}
	_, err := p.GuestExec(ctx, foreign, []string{"rm", "-rf", "/"})
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	g.Expect(sim.GuestExecs(foreignRunning)).To(BeEmpty())

	// Nor into another installation's VM.
	other := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	ref := startOwned(t, sim, other, 302)
	_, err = p.GuestExec(ctx, ref, []string{"true"})
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	g.Expect(sim.GuestExecs(vmidOf(ref.ID))).To(BeEmpty())
}

// TestLastStop tells a guest shutdown (no task) from a stop asked of the hypervisor.
func TestLastStop(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 303)

	g.Expect(sim.PowerOff(vmidOf(ref.ID))).To(Succeed())
	rec, err := p.LastStop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Cause).To(Equal(hypervisor.StopByGuest))

	task, err := p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	task, err = p.Shutdown(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	rec, err = p.LastStop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Cause).To(Equal(hypervisor.StopByHypervisor))
	g.Expect(rec.Task).To(Equal(task))
}

// TestSnapshots takes, lists, rolls back and deletes snapshots with PVE's locks and errors.
func TestSnapshots(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{TaskDuration: 100 * time.Millisecond})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 304)
	g.Expect(sim.WriteGuestData(vmidOf(ref.ID), "v1")).To(Succeed())

	task, err := p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "before-upgrade", Description: "v1", WithMemory: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(task)).To(ContainSubstring(":qmsnapshot:"))
	g.Expect(simVM(t, sim, vmidOf(ref.ID)).Lock).To(Equal("snapshot"), "the VM is locked while the snapshot is taken")
	// A second snapshot while the first runs: PVE's lock error, in the task.
	second, err := p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "other"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(waitTaskDone(t, p, second)).To(MatchError(ContainSubstring("VM is locked (snapshot)")))
	g.Expect(simVM(t, sim, vmidOf(ref.ID)).Lock).To(BeEmpty())

	snaps, err := p.Snapshots(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snaps).To(HaveLen(1))
	g.Expect(snaps[0].Name).To(Equal("before-upgrade"))
	g.Expect(snaps[0].WithMemory).To(BeTrue())
	g.Expect(snaps[0].Time).NotTo(BeZero())

	task, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "before-upgrade"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(MatchError(ContainSubstring("snapshot name 'before-upgrade' already used")))
	_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "current"})
	g.Expect(errors.Is(err, hypervisor.ErrInvalid)).To(BeFalse(), "a valid pattern; PVE refuses the reserved name itself")
	g.Expect(err).To(MatchError(ContainSubstring("reserved name")))
	_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "1-bad name"})
	g.Expect(errors.Is(err, hypervisor.ErrInvalid)).To(BeTrue())

	g.Expect(sim.WriteGuestData(vmidOf(ref.ID), "v2")).To(Succeed())
	task, err = p.RollbackSnapshot(ctx, ref, "before-upgrade", false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	vm := simVM(t, sim, vmidOf(ref.ID))
	g.Expect(vm.GuestData).To(Equal("v1"))
	g.Expect(vm.Status).To(Equal("running"), "a snapshot with memory resumes")
	g.Expect(vm.Parent).To(Equal("before-upgrade"))

	task, err = p.RollbackSnapshot(ctx, ref, "missing", false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(MatchError(ContainSubstring("snapshot 'missing' does not exist")))

	task, err = p.DeleteSnapshot(ctx, ref, "before-upgrade")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	g.Expect(simVM(t, sim, vmidOf(ref.ID)).Snapshots).To(BeEmpty())
}

// TestSnapshotsRefuseForeignVMs: nothing is snapshotted, rolled back or deleted on a VM
// HyperFleet does not own.
func TestSnapshotsRefuseForeignVMs(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	foreign := hypervisor.VMRef{Node: "pve3", ID: idOf(foreignStopped)}
	_, err := p.CreateSnapshot(ctx, foreign, hypervisor.SnapshotSpec{Name: "x"})
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	_, err = p.RollbackSnapshot(ctx, foreign, "x", false)
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	_, err = p.DeleteSnapshot(ctx, foreign, "x")
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	_, err = p.Snapshots(ctx, foreign)
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	g.Expect(simVM(t, sim, foreignStopped).Snapshots).To(BeEmpty())
}

// TestCheckMigration reads PVE's migration precondition: disks on local storage and host devices
// keep a VM from moving live; on shared storage it can go to the other nodes.
func TestCheckMigration(t *testing.T) {
	g := NewWithT(t)
	inv := pvesim.DefaultInventory()
	inv.Storages = append(inv.Storages, pvesim.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true, TotalGiB: 1024})
	sim := startSim(t, pvesim.Config{Inventory: inv})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 305)

	m, err := p.CheckMigration(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Running).To(BeTrue())
	g.Expect(m.LocalDisks).To(ConsistOf(And(HavePrefix("local-lvm:"), HaveSuffix("vm-305-disk-0"))))
	g.Expect(m.LiveMigratable()).To(BeFalse())

	g.Expect(sim.SetVMConfig(vmidOf(ref.ID), "scsi0", "ceph:vm-305-disk-0,size=32G")).To(Succeed())
	m, err = p.CheckMigration(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.LocalDisks).To(BeEmpty())
	g.Expect(m.AllowedHosts).To(Equal([]string{"pve2", "pve3"}))
	g.Expect(m.LiveMigratable()).To(BeTrue())

	g.Expect(sim.SetVMConfig(vmidOf(ref.ID), "hostpci0", "0000:01:00.0,pcie=1")).To(Succeed())
	m, err = p.CheckMigration(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.LocalResources).To(Equal([]string{"hostpci0"}))
	g.Expect(m.LiveMigratable()).To(BeFalse())

	_, err = p.CheckMigration(ctx, hypervisor.VMRef{Node: "pve1", ID: idOf(foreignRunning)})
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue())
}
