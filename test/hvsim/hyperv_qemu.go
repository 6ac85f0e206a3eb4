package hvsim

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// The QEMU backend (HyperVConfig.Guest) boots each VM as a real guest (package qemuguest), as a
// generation 2 VM starts: UEFI, with Secure Boot and Microsoft's UEFI CA when the VM's secure boot
// template is MicrosoftUEFICertificateAuthority (what HyperFleet sets), the boot disk an overlay of
// the template image as the VM's differencing disk is of its parent, the seed ISO in its SCSI DVD
// drive. Hyper-V learns a guest's addresses from the KVP integration service (hv_kvp_daemon in
// the guest); here the guest's qemu-guest-agent stands in for it, asked every two seconds while the
// VM runs, so Get-VM shows no address until the guest's agent answers, as Hyper-V shows none
// until the guest's KVP daemon reports. A shutdown (Stop-VM without -TurnOff) presses the ACPI
// power button where Hyper-V calls the shutdown integration service; the guest powers off either
// way.

// guestID is the QEMU backend's short name for a VM (its directory and sockets' paths must stay
// under the kernel's limit for a Unix socket's path).
func guestID(vm *hvVM) string { return vm.id[:8] }

// guestFirmware is how a VM's generation and secure boot template start it. OVMF's store of
// Microsoft's keys trusts both Microsoft CAs, so only the template that trusts the UEFI CA (the one
// Linux shims are signed by) has an equivalent here: the others (MicrosoftWindows trusts Windows'
// CA alone) are refused rather than booted where Hyper-V would refuse the shim.
func guestFirmware(vm *hvVM) (qemuguest.Firmware, error) {
	switch {
	case vm.generation == 1:
		return qemuguest.BIOS, nil
	case vm.secureBoot == "Off":
		return qemuguest.UEFI, nil
	case vm.secureBoot == "" || vm.secureBoot == "MicrosoftUEFICertificateAuthority":
		return qemuguest.UEFISecureBoot, nil
	default:
		return 0, fmt.Errorf("the QEMU backend has no firmware with only the keys of the secure boot template %s", vm.secureBoot)
	}
}

// qemuBoot is the boot hook of a VM under the QEMU backend. Called with h.mu held.
func (h *HyperV) qemuBoot(hh *hvHost, vm *hvVM, seed []byte) (HyperVBootHook, func()) {
	id, host, vmID, boot := guestID(vm), hh.name, vm.id, vm.boot
	firmware, _ := guestFirmware(vm) // startVM refused the VM if it has none
	m := qemuguest.Machine{Firmware: firmware, Seed: seed, SeedBus: qemuguest.SeedSCSI, Agent: true}
	if len(vm.adapters) > 0 {
		m.MAC = colonMAC(vm.adapters[0].mac)
	}
	qmp, qga := h.guests.Sockets(id)
	hook := func(ctx context.Context, _ HyperVBootVM) error {
		actx, stop := context.WithCancel(ctx)
		defer stop()
		go h.watchGuestAddresses(actx, host, vmID, boot, qga)
		return h.guests.Run(ctx, id, m, func(msg string, args ...any) { h.log.Info(msg, append(args, "host", host)...) })
	}
	shutdown := func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := qemuguest.QMP(ctx, qmp, "system_powerdown", nil); err != nil {
				h.log.Warn("pressing the guest's power button failed", "vm", vmID, "err", err)
			}
		}()
	}
	return hook, shutdown
}

// watchGuestAddresses keeps a running guest's first IPv4 address, as the guest agent reports it,
// in the VM's IPAddresses until ctx ends (the boot ended).
func (h *HyperV) watchGuestAddresses(ctx context.Context, host, id string, boot int, qga string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err := qemuguest.IPv4Addresses(qctx, qga)
		cancel()
		if err != nil || len(addrs) == 0 {
			continue
		}
		h.mu.Lock()
		if hh := h.hosts[host]; hh != nil {
			if vm := hh.vms[id]; vm != nil && vm.boot == boot && vm.state != hvOff {
				vm.ip = addrs[0]
			}
		}
		h.mu.Unlock()
	}
}

// GuestDisk is the qcow2 overlay holding what the guest of VM id wrote (with KeepDisks, also after
// the VM was removed); false without the QEMU backend or before the VM first started.
func (h *HyperV) GuestDisk(id string) (string, bool) {
	if h.guests == nil || len(id) < 8 {
		return "", false
	}
	return h.guests.Disk(id[:8])
}

// GuestConsoleLog is the path of VM id's serial console log (firmware, kernel and systemd output).
func (h *HyperV) GuestConsoleLog(id string) string {
	if h.guests == nil || len(id) < 8 {
		return ""
	}
	return h.guests.ConsoleLog(id[:8])
}

// ForwardToGuests lets QEMU guests started from now on reach target (host:port on loopback) at
// qemuguest.ForwardIP:port. It is a no-op without the QEMU backend.
func (h *HyperV) ForwardToGuests(port int, target string) {
	if h.guests != nil {
		h.guests.AddForward(port, target)
	}
}

// colonMAC writes Hyper-V's twelve hex digits as QEMU wants a MAC.
func colonMAC(mac string) string {
	if len(mac) != 12 {
		return ""
	}
	return fmt.Sprintf("%s:%s:%s:%s:%s:%s", mac[0:2], mac[2:4], mac[4:6], mac[6:8], mac[8:10], mac[10:12])
}
