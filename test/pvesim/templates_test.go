package pvesim

import (
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// TestTemplateCopiesOnSeveralNodes keeps a copy of the runner template on two nodes, as clusters with
// local storage do: both are listed under the same name, each can be linked-cloned on its own node,
// and neither can be linked-cloned to the other node.
func TestTemplateCopiesOnSeveralNodes(t *testing.T) {
	g := NewWithT(t)
	inv := DefaultInventory()
	inv.VMs = append(inv.VMs, RunnerTemplate(9100, "pve3", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu"))
	s := StartForTest(t, Config{Inventory: inv})
	c := tokenClient(t, s)
	ctx := testCtx(t)

	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	rs, err := cl.Resources(ctx, "vm")
	g.Expect(err).NotTo(HaveOccurred())
	copies := map[string]uint64{}
	for _, r := range rs {
		if r.Template == 1 && r.Name == "ubuntu-2404-runner" {
			copies[r.Node] = r.VMID
		}
	}
	g.Expect(copies).To(Equal(map[string]uint64{"pve1": 9000, "pve3": 9100}))

	for i, nodeName := range []string{"pve1", "pve3"} {
		node, err := c.Node(ctx, nodeName)
		g.Expect(err).NotTo(HaveOccurred())
		src, err := node.VirtualMachine(ctx, int(copies[nodeName]))
		g.Expect(err).NotTo(HaveOccurred())
		newid := 500 + i
		_, task, err := src.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: newid, Name: "runner-" + nodeName})
		g.Expect(err).NotTo(HaveOccurred())
		waitOK(ctx, g, task)
		vm, ok := s.VM(newid)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Node).To(Equal(nodeName))
		g.Expect(vm.Disks["scsi0"]).To(HavePrefix("local-lvm:base-%d-disk-0/vm-%d-disk-0,", copies[nodeName], newid))

		other := map[string]string{"pve1": "pve3", "pve3": "pve1"}[nodeName]
		_, _, err = src.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 510 + i, Target: other})
		g.Expect(err).To(MatchError(ContainSubstring("VM uses local storage")), "a linked clone stays on its template's node")
	}
}
