package pvesim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// findRunnerTemplate finds the runner template the way HyperFleet does: one
// /cluster/resources call, filtered by tags.
func findRunnerTemplate(ctx context.Context, g *WithT, c *proxmox.Client) *proxmox.ClusterResource {
	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	rs, err := cl.Resources(ctx, "vm")
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range rs {
		if r.Template == 1 && strings.Contains(";"+r.Tags+";", ";runner;") && r.Name == "ubuntu-2404-runner" {
			return r
		}
	}
	g.Expect(false).To(BeTrue(), "runner template not found in %v", rs)
	return nil
}

func waitOK(ctx context.Context, g *WithT, task *proxmox.Task) {
	g.Expect(task).NotTo(BeNil())
	g.Expect(task.Wait(ctx, 10*time.Millisecond, 10*time.Second)).To(Succeed())
	g.Expect(task.IsSuccessful).To(BeTrue(), "task %s ended with %q", task.UPID, task.ExitStatus)
}

func TestLifecycleWithGoProxmox(t *testing.T) {
	g := NewWithT(t)
	var hookUserData []byte
	booted := make(chan BootVM, 1)
	s := StartForTest(t, Config{TaskDuration: 80 * time.Millisecond, BootDelay: 150 * time.Millisecond,
		BootHook: func(ctx context.Context, vm BootVM) error {
			booted <- vm
			<-ctx.Done() // runs until stopped from outside
			return nil
		}})
	c := tokenClient(t, s)
	ctx := testCtx(t)

	tmpl := findRunnerTemplate(ctx, g, c)
	g.Expect(tmpl.Node).To(Equal("pve1"))
	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	newid, err := cl.NextID(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newid).To(Equal(104))

	node, err := c.Node(ctx, tmpl.Node)
	g.Expect(err).NotTo(HaveOccurred())
	src, err := node.VirtualMachine(ctx, int(tmpl.VMID))
	g.Expect(err).NotTo(HaveOccurred())
	_, task, err := src.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: newid, Name: "runner-104"})
	g.Expect(err).NotTo(HaveOccurred())

	// The clone exists at once, locked, until its task ends.
	vm, ok := s.VM(newid)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Lock).To(Equal("clone"))
	cfg := &proxmox.VirtualMachineConfig{}
	g.Expect(c.Get(ctx, fmt.Sprintf("/nodes/pve1/qemu/%d/config", newid), cfg)).To(Succeed())
	g.Expect(cfg.Lock).To(Equal("clone"))
	waitOK(ctx, g, task)
	vm, _ = s.VM(newid)
	g.Expect(vm.Lock).To(BeEmpty())
	g.Expect(vm.Template).To(BeFalse())
	g.Expect(vm.Name).To(Equal("runner-104"))
	g.Expect(vm.Disks["scsi0"]).To(HavePrefix(fmt.Sprintf("local-lvm:base-9000-disk-0/vm-%d-disk-0,", newid)))
	g.Expect(vm.Net["net0"]).NotTo(Equal(s.mustVM(t, 9000).Net["net0"]), "a clone gets a new MAC")

	machine, err := node.VirtualMachine(ctx, newid)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bool(machine.Template)).To(BeFalse())
	task, err = machine.Config(ctx,
		proxmox.VirtualMachineOption{Name: "cores", Value: 4},
		proxmox.VirtualMachineOption{Name: "memory", Value: "4096"},
		proxmox.VirtualMachineOption{Name: "net0", Value: "virtio,bridge=vmbr0,tag=20"},
		proxmox.VirtualMachineOption{Name: "tags", Value: "Runner;hyperfleet,runner"},
		proxmox.VirtualMachineOption{Name: "description", Value: "HyperFleet runner"},
	)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	vm, _ = s.VM(newid)
	g.Expect(vm.Cores).To(Equal(4))
	g.Expect(vm.MemoryMiB).To(Equal(4096))
	g.Expect(vm.Tags).To(Equal([]string{"hyperfleet", "runner"}))
	g.Expect(vm.Description).To(Equal("HyperFleet runner"))
	g.Expect(vm.Net["net0"]).To(MatchRegexp(`^virtio=BC:24:11:[0-9A-F:]{8},bridge=vmbr0,tag=20$`))

	task, err = machine.ResizeDisk(ctx, "scsi0", "+8G")
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	vm, _ = s.VM(newid)
	g.Expect(vm.Disks["scsi0"]).To(HaveSuffix("size=40G"))

	machine, err = node.VirtualMachine(ctx, newid)
	g.Expect(err).NotTo(HaveOccurred())
	userData := "#cloud-config\nruncmd: [echo hello]\n"
	g.Expect(machine.CloudInit(ctx, "ide2", userData, "instance-id: runner-104\n", "", "")).To(Succeed())
	vm, _ = s.VM(newid)
	iso := fmt.Sprintf("local:iso/user-data-%d.iso", newid)
	g.Expect(vm.Disks["ide2"]).To(Equal(iso + ",media=cdrom"))
	g.Expect(vm.Config["boot"]).To(Equal("order=scsi0;net0;ide2"))
	g.Expect(vm.Tags).To(ContainElement("go-proxmox+cloud-init"))
	_, onStorage := s.StorageFile("pve1", iso)
	g.Expect(onStorage).To(BeTrue())

	task, err = machine.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	var bvm BootVM
	g.Eventually(booted).Should(Receive(&bvm))
	hookUserData = bvm.UserData
	g.Expect(string(hookUserData)).To(Equal(userData))
	g.Expect(bvm.Name).To(Equal("runner-104"))

	// Before the boot delay the agent is not up yet.
	_, err = machine.AgentGetNetworkIFaces(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("500 QEMU guest agent is not running")))
	var ifaces []*proxmox.AgentNetworkIface
	g.Eventually(func() error {
		ifaces, err = machine.AgentGetNetworkIFaces(ctx)
		return err
	}).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	g.Expect(ifaces).To(HaveLen(1))
	g.Expect(ifaces[0].Name).To(Equal("eth0"))
	g.Expect(strings.ToUpper(ifaces[0].HardwareAddress)).To(Equal(strings.Split(strings.Split(vm.Net["net0"], ",")[0], "=")[1]))
	g.Expect(ifaces[0].IPAddresses[0].IPAddress).To(HavePrefix("10.77."))

	// A running VM cannot be destroyed.
	_, err = machine.Delete(ctx, nil)
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("VM %d is running - destroy failed", newid))))

	task, err = machine.Stop(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	vm, _ = s.VM(newid)
	g.Expect(vm.Status).To(Equal("stopped"))

	machine, err = node.VirtualMachine(ctx, newid)
	g.Expect(err).NotTo(HaveOccurred())
	task, err = machine.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	_, ok = s.VM(newid)
	g.Expect(ok).To(BeFalse())
	_, onStorage = s.StorageFile("pve1", iso)
	g.Expect(onStorage).To(BeFalse(), "go-proxmox removes its cloud-init ISO before destroying the VM")

	_, err = node.VirtualMachine(ctx, newid)
	g.Expect(err).To(MatchError(fmt.Sprintf("500 Configuration file 'nodes/pve1/qemu-server/%d.conf' does not exist", newid)))
}

func (s *Simulator) mustVM(t *testing.T, vmid int) VM {
	t.Helper()
	vm, ok := s.VM(vmid)
	if !ok {
		t.Fatalf("VM %d missing", vmid)
	}
	return vm
}
