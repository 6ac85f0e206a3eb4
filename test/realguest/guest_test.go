package realguest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestGuestUnderTheSimulator boots the runner template through the Proxmox API alone, with a
// client HyperFleet did not write (go-proxmox, which builds and attaches its own NoCloud seed):
// the guest's real qemu-guest-agent answers network-get-interfaces and exec through the
// simulator, and a shutdown request presses the guest's power button over QMP, after which the
// guest powers off, QEMU ends and the VM reads stopped.
func TestGuestUnderTheSimulator(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{
		TaskDuration: 50 * time.Millisecond,
		Guest:        &pvesim.QEMUGuest{Image: fleetImage, Dir: t.TempDir()},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*guestBound)
	defer cancel()
	node, err := sim.PersonClient().Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	template, err := node.VirtualMachine(ctx, 9000)
	g.Expect(err).NotTo(HaveOccurred())
	newid, task, err := template.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 500, Name: "guest-500"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.WaitFor(ctx, 30)).To(Succeed())
	vm, err := node.VirtualMachine(ctx, newid)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.CloudInit(ctx, "ide3", "#cloud-config\nruncmd:\n- [sh, -c, 'echo guest-500 ran its runcmd > /run/realguest']\n",
		"instance-id: guest-500\nlocal-hostname: guest-500\n", "", "")).To(Succeed())
	task, err = vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.WaitFor(ctx, 30)).To(Succeed())
	started := time.Now()

	var ifaces []*proxmox.AgentNetworkIface
	g.Eventually(func(g Gomega) {
		ifaces, err = vm.AgentGetNetworkIFaces(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	}, guestBound, 2*time.Second).Should(Succeed(), "the guest agent answers (console: %s)", sim.GuestConsoleLog(newid))
	t.Logf("guest agent answered %s after the start", time.Since(started).Round(time.Second))
	var addrs []string
	for _, i := range ifaces {
		for _, a := range i.IPAddresses {
			addrs = append(addrs, a.IPAddress)
		}
	}
	g.Expect(addrs).To(ContainElement("10.0.2.15"), "QEMU's user network leased the guest its address")

	// cloud-init ran the seed's runcmd; the guest agent runs a command to show it.
	g.Eventually(func(g Gomega) {
		pid, err := vm.AgentExec(ctx, []string{"cat", "/run/realguest"}, "")
		g.Expect(err).NotTo(HaveOccurred())
		var st *proxmox.AgentExecStatus
		g.Eventually(func(g Gomega) {
			st, err = vm.AgentExecStatus(ctx, pid)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Exited).To(Equal(1))
		}, 30*time.Second, time.Second).Should(Succeed())
		g.Expect(st.ExitCode).To(Equal(0))
		g.Expect(strings.TrimSpace(st.OutData)).To(Equal("guest-500 ran its runcmd"))
	}, guestBound, 2*time.Second).Should(Succeed(), "cloud-init runs the seed's runcmd")
	t.Logf("cloud-init's runcmd done %s after the start", time.Since(started).Round(time.Second))

	task, err = vm.Shutdown(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.WaitFor(ctx, int(guestBound.Seconds()))).To(Succeed())
	g.Expect(task.ExitStatus).To(Equal("OK"), "the guest powered off when its power button was pressed")
	state, _ := sim.VM(newid)
	g.Expect(state.Status).To(Equal("stopped"))
	disk, ok := sim.GuestDisk(newid)
	g.Expect(ok).To(BeTrue())
	_, err = os.Stat(disk)
	g.Expect(err).NotTo(HaveOccurred(), "a stopped VM keeps its disk")
}
