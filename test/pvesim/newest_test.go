package pvesim

import (
	"context"
	"fmt"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// cloneWithGoProxmox clones the runner template to a new VM with go-proxmox and returns it.
func cloneWithGoProxmox(ctx context.Context, g *WithT, c *proxmox.Client, name string) *proxmox.VirtualMachine {
	tmpl := findRunnerTemplate(ctx, g, c)
	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	id, err := cl.NextID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	node, err := c.Node(ctx, tmpl.Node)
	g.Expect(err).NotTo(HaveOccurred())
	src, err := node.VirtualMachine(ctx, int(tmpl.VMID))
	g.Expect(err).NotTo(HaveOccurred())
	_, task, err := src.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: id, Name: name})
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	vm, err := node.VirtualMachine(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	return vm
}

// taskOrCallError is the error PVE reports for a request that fails either before its worker
// starts (the call's error) or in it (the task's exit status), as go-proxmox sees both.
func taskOrCallError(ctx context.Context, task *proxmox.Task, err error) string {
	if err != nil {
		return err.Error()
	}
	if werr := task.Wait(ctx, 10*time.Millisecond, 10*time.Second); werr != nil {
		return werr.Error()
	}
	if !task.IsSuccessful {
		return task.ExitStatus
	}
	return ""
}

// TestSnapshotsWithGoProxmox drives the snapshot endpoints with go-proxmox, a client nobody here
// wrote: create, list (with PVE's "current" entry), read and describe, roll back and delete, and
// PVE's refusals in its words.
func TestSnapshotsWithGoProxmox(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	vm := cloneWithGoProxmox(ctx, g, c, "snap")

	task, err := vm.NewSnapshot(ctx, "before")
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	snaps, err := vm.Snapshots(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	names := []string{}
	for _, sn := range snaps {
		names = append(names, sn.Name)
	}
	g.Expect(names).To(ConsistOf("before", "current"), "PVE lists the running state as 'current'")

	g.Expect(vm.Snapshot("before").UpdateConfig(ctx, &proxmox.VirtualMachineSnapshotUpdateOptions{Description: "base line"})).To(Succeed())
	cfg, err := vm.Snapshot("before").Config(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(And(HaveKeyWithValue("description", "base line"), HaveKey("snaptime")))

	task, err = vm.NewSnapshot(ctx, "before")
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("snapshot name 'before' already used"))
	task, err = vm.NewSnapshot(ctx, "current")
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("unable to use snapshot name 'current' (reserved name)"))
	task, err = vm.Snapshot("nope").Rollback(ctx)
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("snapshot 'nope' does not exist"))
	task, err = vm.Snapshot("nope").Delete(ctx)
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("snapshot 'nope' does not exist"))
	_, err = vm.Snapshot("nope").Config(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("snapshot 'nope' does not exist")))

	task, err = vm.Snapshot("before").Rollback(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	task, err = vm.Snapshot("before").Delete(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	snaps, err = vm.Snapshots(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snaps).To(HaveLen(1))
	g.Expect(snaps[0].Name).To(Equal("current"))
}

// TestMigrationWithGoProxmox drives the migration endpoints with go-proxmox: the precondition
// check decodes into go-proxmox's own type, an offline migration moves the VM, and PVE's refusals
// come back in its words.
func TestMigrationWithGoProxmox(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	vm := cloneWithGoProxmox(ctx, g, c, "mover")

	// go-proxmox's MigratePreconditions decodes into booleans, but PVE answers its boolean
	// fields as the integers 0 and 1 (Perl's), as the simulator does: read it as PVE sends it.
	// HyperFleet's provider reads these fields with its own types.
	var pre map[string]any
	g.Expect(c.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/migrate?target=pve2", vm.Node, vm.VMID), &pre)).To(Succeed())
	g.Expect(pre).To(And(HaveKeyWithValue("running", BeNumerically("==", 0)), HaveKeyWithValue("allowed_nodes", ContainElement("pve2")),
		HaveKey("local_disks"), HaveKey("local_resources")))

	task, err := vm.Migrate(ctx, &proxmox.VirtualMachineMigrateOptions{Target: "nope"})
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("no such cluster node 'nope'"))

	task, err = vm.Migrate(ctx, &proxmox.VirtualMachineMigrateOptions{Target: "pve2"})
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	moved, ok := s.VM(int(vm.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(moved.Node).To(Equal("pve2"))

	node2, err := c.Node(ctx, "pve2")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err = node2.VirtualMachine(ctx, int(vm.VMID))
	g.Expect(err).NotTo(HaveOccurred())
	task, err = vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	task, err = vm.Migrate(ctx, &proxmox.VirtualMachineMigrateOptions{Target: "pve1"})
	g.Expect(taskOrCallError(ctx, task, err)).To(ContainSubstring("can't migrate running VM without --online"))
}

// TestGuestAgentAndPCIMappingsWithGoProxmox: the guest agent's exec and exec-status, and the
// cluster's PCI mappings, decoded by go-proxmox's own types; PVE's refusals in its words.
func TestGuestAgentAndPCIMappingsWithGoProxmox(t *testing.T) {
	g := NewWithT(t)
	inv := DefaultInventory()
	inv.PCIMappings = []PCIMappingSpec{{ID: "gpu", Nodes: []string{"pve2"}}}
	s := StartForTest(t, Config{Inventory: inv})
	c := tokenClient(t, s)
	ctx := testCtx(t)

	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	mappings, err := cl.PCIMappings(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mappings).To(HaveLen(1))
	g.Expect(mappings[0].ID).To(Equal("gpu"))

	vm := cloneWithGoProxmox(ctx, g, c, "agent")
	// go-proxmox's AgentExec drops the API's error (it reports "no pid returned"): PVE's refusals
	// are read with its plain client.
	exec := fmt.Sprintf("/nodes/%s/qemu/%d/agent/exec", vm.Node, vm.VMID)
	g.Expect(c.Post(ctx, exec, map[string]any{"command": []string{"echo", "hi"}}, nil)).
		To(MatchError(ContainSubstring(fmt.Sprintf("VM %d is not running", vm.VMID))))
	task, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "agent", Value: "enabled=1"})
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	task, err = vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	g.Eventually(func() error {
		return c.Post(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/agent/ping", vm.Node, vm.VMID), nil, nil)
	},
		10*time.Second, 50*time.Millisecond).Should(Succeed())
	pid, err := vm.AgentExec(ctx, []string{"echo", "hi"}, "")
	g.Expect(err).NotTo(HaveOccurred())
	var st *proxmox.AgentExecStatus
	g.Eventually(func() bool {
		st, err = vm.AgentExecStatus(ctx, pid)
		return err == nil && st.Exited == 1
	}, 5*time.Second, 20*time.Millisecond).Should(BeTrue())
	g.Expect(st.OutData).To(Equal("hi\n"))
	g.Expect(st.ExitCode).To(Equal(0))
	g.Expect(c.Post(ctx, exec, map[string]any{"command": []string{"no-such-program"}}, nil)).
		To(MatchError(ContainSubstring("Agent error: Failed to execute child process")))
}
