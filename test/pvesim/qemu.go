package pvesim

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// GuestForwardIP is the address a QEMU guest dials for the services its simulator forwards to it
// (QEMUGuest.Forwards): inside QEMU's user-mode network, outside the DHCP range, and not the host
// (10.0.2.2), which a restricted guest cannot reach.
const GuestForwardIP = qemuguest.ForwardIP

// QEMUGuest makes a VM start boot a real operating system under QEMU (package qemuguest) instead
// of calling the BootHook, as Proxmox boots it: SeaBIOS, the boot disk a copy-on-write overlay of
// Image on virtio-scsi (as a linked clone's disk is of its template's), the NoCloud seed ISO
// attached to the VM its IDE CD-ROM, and the guest's qemu-guest-agent answering the agent/*
// endpoints when the VM's agent option is on. A guest's power-off ends QEMU and the VM reads
// stopped; a stop or shutdown request reaches QEMU over QMP. TCG only: it runs where there is no
// KVM, slowly (a Debian guest takes about 90 s to reach cloud-init's runcmd on one vCPU).
type QEMUGuest = qemuguest.Config

// GuestForward lets guests reach Target (host:port, on loopback) at GuestForwardIP:Port.
type GuestForward = qemuguest.Forward

// ForwardToGuests lets QEMU guests started from now on reach target (host:port on loopback) at
// GuestForwardIP:port. It is a no-op without the QEMU backend.
func (s *Simulator) ForwardToGuests(port int, target string) {
	if s.qemu != nil {
		s.qemu.AddForward(port, target)
	}
}

// GuestDisk is the qcow2 overlay holding what vmid's guest wrote (with KeepDisks, also after the
// VM was destroyed); false without the QEMU backend or before the VM first started.
func (s *Simulator) GuestDisk(vmid int) (string, bool) {
	if s.qemu == nil {
		return "", false
	}
	return s.qemu.Disk(strconv.Itoa(vmid))
}

// GuestConsoleLog is the path of vmid's serial console log (the kernel's and systemd's output).
func (s *Simulator) GuestConsoleLog(vmid int) string {
	if s.qemu == nil {
		return ""
	}
	return s.qemu.ConsoleLog(strconv.Itoa(vmid))
}

// qemuVM is one running QEMU process's control sockets.
type qemuVM struct {
	qmp string
	qga string
}

// qemuBoot is what startBoot runs for a VM under the QEMU backend: QEMU until the guest powers
// off or ctx ends (a stop, a destroy, Close). seed is the attached NoCloud ISO (nil: no CD-ROM),
// mac net0's MAC.
func (s *Simulator) qemuBoot(vmid int, seed []byte, mac string, agent bool) BootHook {
	return func(ctx context.Context, _ BootVM) error {
		return s.qemu.Run(ctx, strconv.Itoa(vmid), qemuguest.Machine{Firmware: qemuguest.BIOS, Seed: seed, SeedBus: qemuguest.SeedIDE, MAC: mac, Agent: agent},
			func(msg string, args ...any) { s.log.Info(msg, args...) })
	}
}

// qemuSockets are the control sockets of vmid's running QEMU, if it runs one, and whether its
// guest agent is enabled.
func (s *Simulator) qemuSockets(vmid int) (*qemuVM, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	b := s.boots[vmid]
	if !ok || vm.status != "running" || b == nil || b.qemu == nil {
		return nil, false, false
	}
	return b.qemu, agentEnabled(vm), true
}

func (s *Simulator) qmpSocket(vmid int) (string, bool) {
	q, _, ok := s.qemuSockets(vmid)
	if !ok {
		return "", false
	}
	return q.qmp, true
}

// qemuShutdown asks a QEMU guest to shut down and waits up to timeout for it to power off, as
// qemu-server's shutdown does: through the guest agent (guest-shutdown) when the VM has one
// enabled, else with the ACPI power button (QMP system_powerdown).
func (s *Simulator) qemuShutdown(vmid int, timeout time.Duration) {
	q, agent, ok := s.qemuSockets(vmid)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	var err error
	if agent {
		// The agent does not answer guest-shutdown: it goes down with the guest.
		if _, err = qemuguest.QGA(ctx, q.qga, "guest-shutdown", nil); errors.Is(err, qemuguest.ErrAgentNotRunning) {
			_, err = qemuguest.QMP(ctx, q.qmp, "system_powerdown", nil)
		} else {
			err = nil
		}
	} else {
		_, err = qemuguest.QMP(ctx, q.qmp, "system_powerdown", nil)
	}
	cancel()
	if err != nil {
		s.log.Warn("shutting the guest down failed", "vmid", vmid, "err", err)
		return
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, running := s.qmpSocket(vmid); !running {
			return
		}
		select {
		case <-s.closing:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// qemuReset resets a QEMU guest (reboot and reset both restart the guest at once here).
func (s *Simulator) qemuReset(vmid int) {
	socket, ok := s.qmpSocket(vmid)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := qemuguest.QMP(ctx, socket, "system_reset", nil); err != nil {
		s.log.Warn("QMP system_reset failed", "vmid", vmid, "err", err)
	}
}
