package proxmox

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestMigrate moves an owned VM with PVE's POST …/migrate: the refusals come back in PVE's words
// (from the request or from the task), a VM on shared storage moves live, and a foreign VM is
// never moved.
func TestMigrate(t *testing.T) {
	g := NewWithT(t)
	inv := pvesim.DefaultInventory()
	inv.Storages = append(inv.Storages, pvesim.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true, TotalGiB: 1024})
	sim := startSim(t, pvesim.Config{Inventory: inv})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 311)

	_, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "pve2"})
	g.Expect(errors.Is(err, hypervisor.ErrInvalid)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("can't migrate running VM without --online"))

	_, err = p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: ref.Node, Online: true})
	g.Expect(errors.Is(err, hypervisor.ErrInvalid)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("target is local node"))

	// Its disk is on local-lvm: the task fails and the VM stays.
	task, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "pve2", Online: true})
	g.Expect(err).NotTo(HaveOccurred())
	err = waitTaskDone(t, p, task)
	g.Expect(errors.Is(err, hypervisor.ErrTaskFailed)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("can't migrate local disk 'local-lvm:"))
	g.Expect(simVM(t, sim, 311).Node).To(Equal("pve1"))
	g.Expect(simVM(t, sim, 311).Lock).To(BeEmpty())

	// A host device pins a running VM whatever its disks.
	g.Expect(sim.SetVMConfig(311, "scsi0", "ceph:vm-311-disk-0,size=32G")).To(Succeed())
	g.Expect(sim.SetVMConfig(311, "hostpci0", "0000:01:00.0,pcie=1")).To(Succeed())
	task, err = p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "pve2", Online: true})
	g.Expect(err).NotTo(HaveOccurred())
	err = waitTaskDone(t, p, task)
	g.Expect(err).To(MatchError(ContainSubstring("can't migrate VM which uses local devices: hostpci0")))

	// On shared storage without devices it moves live and keeps running.
	g.Expect(sim.SetVMConfig(311, "hostpci0", "")).To(Succeed())
	task, err = p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "pve2", Online: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(simVM(t, sim, 311).Lock).To(Equal("migrate"))
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	moved := simVM(t, sim, 311)
	g.Expect(moved.Node).To(Equal("pve2"))
	g.Expect(moved.Status).To(Equal("running"))
	g.Expect(moved.Lock).To(BeEmpty())
	vm, err := p.VM(ctx, hypervisor.VMRef{Node: "pve2", ID: ref.ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.State).To(Equal(hypervisor.PowerStateRunning))

	_, err = p.Migrate(ctx, hypervisor.VMRef{Node: "pve1", ID: idOf(foreignRunning)}, hypervisor.MigrateSpec{Target: "pve2", Online: true})
	g.Expect(errors.Is(err, hypervisor.ErrNotOwned)).To(BeTrue(), "%v", err)
	g.Expect(simVM(t, sim, foreignRunning).Node).To(Equal("pve1"))
}

// TestCancelMigration stops a migration task part-way: PVE interrupts it and the VM stays on its
// source node, unlocked.
func TestCancelMigration(t *testing.T) {
	g := NewWithT(t)
	inv := pvesim.DefaultInventory()
	inv.Storages = append(inv.Storages, pvesim.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true, TotalGiB: 1024})
	sim := startSim(t, pvesim.Config{Inventory: inv, TaskDuration: 400 * time.Millisecond})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := startOwned(t, sim, p, 312)
	g.Expect(sim.SetVMConfig(312, "scsi0", "ceph:vm-312-disk-0,size=32G")).To(Succeed())

	task, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "pve3", Online: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.CancelTask(ctx, "", task)).To(Succeed())
	err = waitTaskDone(t, p, task)
	g.Expect(err).To(MatchError(ContainSubstring("received interrupt")))
	vm := simVM(t, sim, 312)
	g.Expect(vm.Node).To(Equal("pve1"))
	g.Expect(vm.Lock).To(BeEmpty())

	g.Expect(p.CancelTask(ctx, "pve2", task)).To(MatchError(ContainSubstring(`not "pve2"`)))
}
