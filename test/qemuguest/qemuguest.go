// Package qemuguest boots real operating systems for the hypervisor simulators: a VM start runs
// qemu-system-x86_64 (TCG: there is no KVM on the test machines) on a copy-on-write overlay of a
// template image, as a linked clone or a differencing disk is, with the NoCloud seed ISO the
// simulator was given as its CD-ROM, a virtio-serial channel to the guest's qemu-guest-agent, and
// QEMU's user-mode network with restrict=on, in which the guest reaches nothing but the services
// forwarded to it. A guest's power-off ends QEMU; a stop from outside goes to QEMU over QMP.
//
// The Proxmox simulator boots its VMs as Proxmox does (SeaBIOS, virtio-scsi, the seed on ide3);
// the Hyper-V simulator as a generation 2 VM (UEFI with Secure Boot and Microsoft's UEFI CA in
// its database, the seed a SCSI DVD). Neither emulates the other devices of those hypervisors:
// Hyper-V's VMBus disks and network adapters are virtio here.
package qemuguest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ForwardIP is the address a guest dials for the services forwarded to it (Config.Forwards): inside
// QEMU's user-mode network, outside its DHCP range, and not the host (10.0.2.2), which a restricted
// guest cannot reach.
const ForwardIP = "10.0.2.100"

// GuestIP is the address QEMU's user-mode network leases a guest.
const GuestIP = "10.0.2.15"

// Config is a host's QEMU backend.
type Config struct {
	// Image is the template image every VM boots (hack/template.sh builds HyperFleet's); its format
	// is vhdx when the name ends in .vhdx, else qcow2.
	Image string
	// Dir receives each VM's overlay, seed, sockets and serial console log (vm-<id>/); default a
	// temporary directory removed by Close.
	Dir string
	// Binary is the QEMU system emulator; default qemu-system-x86_64 from PATH.
	Binary string
	// MemoryMiB (default 1024) and CPUs (default 1) of every guest, whatever the VM's configuration
	// says: TCG gains nothing from more vCPUs on a small machine.
	MemoryMiB int
	CPUs      int
	// Forwards are the services a guest may reach, at ForwardIP; Host.AddForward adds more.
	Forwards []Forward
	// KeepDisks keeps a destroyed VM's disk until Close, so a test can read what the guest left on
	// it (Host.Disk).
	KeepDisks bool
}

// Forward lets guests reach Target (host:port, on loopback) at ForwardIP:Port.
type Forward struct {
	Port   int
	Target string
}

// Firmware is what starts a guest.
type Firmware int

const (
	// BIOS is SeaBIOS on an i440FX machine, as Proxmox VE's default (and Hyper-V generation 1).
	BIOS Firmware = iota
	// UEFI is OVMF on a Q35 machine without Secure Boot (Debian's OVMF_CODE_4M.fd), as a generation
	// 2 Hyper-V VM whose secure boot is off.
	UEFI
	// UEFISecureBoot is OVMF on a Q35 machine with SMM, Secure Boot enforced and Microsoft's keys
	// enrolled (Debian's ovmf: OVMF_CODE_4M.secboot.fd with OVMF_VARS_4M.ms.fd), as a Hyper-V
	// generation 2 VM with the MicrosoftUEFICertificateAuthority template starts.
	UEFISecureBoot
)

// SeedBus is where the seed ISO is attached.
type SeedBus int

const (
	// SeedIDE is an IDE CD-ROM (Proxmox's ide3, or ide2).
	SeedIDE SeedBus = iota
	// SeedSCSI is a SCSI DVD on the disk's controller, as on a generation 2 Hyper-V VM.
	SeedSCSI
)

// OVMF's firmware and variable store templates, from Debian's ovmf: with Secure Boot and
// Microsoft's keys enrolled, and without.
const (
	OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	OVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	OVMFCode       = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars       = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// ovmf is f's firmware and variable store template ("" for BIOS).
func ovmf(f Firmware) (code, vars string) {
	switch f {
	case UEFI:
		return OVMFCode, OVMFVars
	case UEFISecureBoot:
		return OVMFSecureCode, OVMFSecureVars
	}
	return "", ""
}

// Machine is one VM's hardware for one boot.
type Machine struct {
	Firmware Firmware
	// Seed is the NoCloud ISO in the VM's CD-ROM (nil: none), on SeedBus.
	Seed    []byte
	SeedBus SeedBus
	// MAC is the network adapter's address (empty: QEMU's).
	MAC string
	// Agent connects the qemu-guest-agent channel (Host.Sockets' qga).
	Agent bool
}

// Host runs the QEMU guests of one simulator.
type Host struct {
	cfg     Config
	format  string
	tempDir bool
	socat   string

	mu       sync.Mutex
	forwards []Forward
	// disks is each VM's overlay, live or (KeepDisks) kept after its VM was destroyed.
	disks   map[string]string
	removed int
}

// New checks that QEMU, qemu-img and socat are installed and the image exists.
func New(cfg Config) (*Host, error) {
	if cfg.Image == "" {
		return nil, errors.New("qemuguest: Config.Image is required")
	}
	if _, err := os.Stat(cfg.Image); err != nil {
		return nil, fmt.Errorf("qemuguest: guest image: %w", err)
	}
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("qemuguest: %s: %w (Debian: apt-get install qemu-system-x86)", cfg.Binary, err)
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return nil, fmt.Errorf("qemuguest: qemu-img: %w (Debian: apt-get install qemu-utils)", err)
	}
	// QEMU's guestfwd runs a command per connection; socat joins it to the forwarded service.
	socat, err := exec.LookPath("socat")
	if err != nil {
		return nil, fmt.Errorf("qemuguest: socat: %w (Debian: apt-get install socat)", err)
	}
	if cfg.MemoryMiB <= 0 {
		cfg.MemoryMiB = 1024
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	h := &Host{cfg: cfg, format: "qcow2", socat: socat, forwards: append([]Forward(nil), cfg.Forwards...), disks: map[string]string{}}
	if strings.HasSuffix(strings.ToLower(cfg.Image), ".vhdx") {
		h.format = "vhdx"
	}
	if h.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "qemu-guests-")
		if err != nil {
			return nil, err
		}
		h.cfg.Dir, h.tempDir = dir, true
	}
	if h.cfg.Image, err = filepath.Abs(h.cfg.Image); err != nil {
		return nil, err
	}
	return h, nil
}

// CheckFirmware says whether f can be booted here (UEFI needs Debian's ovmf).
func CheckFirmware(f Firmware) error {
	code, vars := ovmf(f)
	if code == "" {
		return nil
	}
	for _, p := range []string{code, vars} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("qemuguest: UEFI firmware: %w (Debian: apt-get install ovmf)", err)
		}
	}
	return nil
}

// AddForward lets guests started from now on reach target (host:port on loopback) at
// ForwardIP:port.
func (h *Host) AddForward(port int, target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forwards = append(h.forwards, Forward{Port: port, Target: target})
}

// Disk is the qcow2 overlay holding what id's guest wrote (with KeepDisks, also after the VM was
// destroyed); false before the VM first started.
func (h *Host) Disk(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.disks[id]
	return p, ok
}

// VMDir is where id's overlay, seed, sockets and logs are.
func (h *Host) VMDir(id string) string { return filepath.Join(h.cfg.Dir, "vm-"+id) }

// ConsoleLog is the path of id's serial console log (firmware, kernel and systemd output).
func (h *Host) ConsoleLog(id string) string { return filepath.Join(h.VMDir(id), "serial.log") }

// Sockets are id's QMP monitor and guest agent sockets while it runs.
func (h *Host) Sockets(id string) (qmp, qga string) {
	return filepath.Join(h.VMDir(id), "qmp.sock"), filepath.Join(h.VMDir(id), "qga.sock")
}

// Run boots id with m and returns when the guest powers off (nil or QEMU's exit error) or when ctx
// ends (a stop from outside, a destroy, the simulator closing: QMP quit, then a kill), with
// ctx.Err(). The VM's disk is made on its first boot and kept across boots.
func (h *Host) Run(ctx context.Context, id string, m Machine, log func(string, ...any)) error {
	dir := h.VMDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := CheckFirmware(m.Firmware); err != nil {
		return err
	}
	qmp, qga := h.Sockets(id)
	disk := filepath.Join(dir, "disk.qcow2")
	if _, err := os.Stat(disk); errors.Is(err, os.ErrNotExist) {
		// A linked clone: the guest's writes land in the overlay, the template image stays as built.
		out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", h.format, "-b", h.cfg.Image, disk).CombinedOutput()
		if err != nil {
			return fmt.Errorf("qemu-img create: %v: %s", err, out)
		}
	}
	h.mu.Lock()
	h.disks[id] = disk
	forwards := append([]Forward(nil), h.forwards...)
	h.mu.Unlock()

	machine := "pc"
	args := []string{"-name", "vm-" + id}
	if code, varsTemplate := ovmf(m.Firmware); code != "" {
		// The VM's own variable store, made from the template on its first boot and kept, as a VM's
		// NVRAM is.
		vars := filepath.Join(dir, "efivars.fd")
		if _, err := os.Stat(vars); errors.Is(err, os.ErrNotExist) {
			data, err := os.ReadFile(varsTemplate)
			if err != nil {
				return err
			}
			if err := os.WriteFile(vars, data, 0o600); err != nil {
				return err
			}
		}
		machine = "q35"
		if m.Firmware == UEFISecureBoot {
			// Secure Boot: the firmware's flash is writable only from SMM.
			machine = "q35,smm=on"
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		args = append(args, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	}
	args = append(args,
		"-machine", machine, "-accel", "tcg",
		"-smp", strconv.Itoa(h.cfg.CPUs), "-m", strconv.Itoa(h.cfg.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-serial", "file:"+filepath.Join(dir, "serial.log"),
		"-qmp", "unix:"+qmp+",server=on,wait=off",
		// The boot disk on virtio-scsi (Proxmox's scsi0; Hyper-V's SCSI controller).
		"-device", "virtio-scsi-pci,id=scsihw0",
		"-drive", "file="+disk+",if=none,id=drive-scsi0,format=qcow2,discard=unmap,detect-zeroes=unmap",
		"-device", "scsi-hd,bus=scsihw0.0,drive=drive-scsi0,bootindex=100",
	)
	if m.Seed != nil {
		iso := filepath.Join(dir, "seed.iso")
		if err := os.WriteFile(iso, m.Seed, 0o600); err != nil {
			return err
		}
		args = append(args, "-drive", "file="+iso+",if=none,id=drive-cd0,media=cdrom,readonly=on")
		switch {
		case m.SeedBus == SeedSCSI:
			args = append(args, "-device", "scsi-cd,bus=scsihw0.0,drive=drive-cd0")
		case m.Firmware != BIOS:
			// Q35 has AHCI, not the i440FX's IDE buses.
			args = append(args, "-device", "ide-cd,bus=ide.1,drive=drive-cd0")
		default:
			args = append(args, "-device", "ide-cd,bus=ide.1,unit=1,drive=drive-cd0")
		}
	}
	if m.Agent {
		args = append(args,
			"-chardev", "socket,id=qga0,path="+qga+",server=on,wait=off",
			"-device", "virtio-serial-pci,id=qga-serial",
			"-device", "virtserialport,bus=qga-serial.0,chardev=qga0,name=org.qemu.guest_agent.0")
	}
	netdev := "user,id=net0,restrict=on"
	for _, f := range forwards {
		netdev += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s - TCP:%s", ForwardIP, f.Port, h.socat, f.Target)
	}
	nic := "virtio-net-pci,netdev=net0,romfile="
	if m.MAC != "" {
		nic += ",mac=" + m.MAC
	}
	args = append(args, "-netdev", netdev, "-device", nic)

	logf, err := os.OpenFile(filepath.Join(dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	fmt.Fprintf(logf, "%s %s %s\n", time.Now().Format(time.RFC3339), h.cfg.Binary, strings.Join(args, " "))
	cmd := exec.Command(h.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	// The parent-death signal follows the thread that started QEMU: keep this goroutine on it
	// until QEMU ends, so the Go runtime never retires that thread while the guest runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting QEMU: %w", err)
	}
	log("QEMU guest started", "vm", id, "pid", cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
		log("QEMU guest powered off", "vm", id, "err", err)
		return err
	case <-ctx.Done():
	}
	// Powered off from outside: QMP's quit closes the disk cleanly; a QEMU that does not answer is
	// killed.
	qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, qerr := QMP(qctx, qmp, "quit", nil)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		log("QEMU did not quit; killing it", "vm", id, "qmp", qerr)
		_ = cmd.Process.Kill()
		<-done
	}
	return ctx.Err()
}

// Forget drops id's disk when its VM is destroyed, or keeps it aside (KeepDisks).
func (h *Host) Forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dir := h.VMDir(id)
	if _, ok := h.disks[id]; !ok {
		return
	}
	if !h.cfg.KeepDisks {
		delete(h.disks, id)
		go func() { _ = os.RemoveAll(dir) }()
		return
	}
	// The ID may be reused: its next VM starts from a fresh overlay.
	h.removed++
	kept := fmt.Sprintf("%s.destroyed-%d", dir, h.removed)
	if err := os.Rename(dir, kept); err == nil {
		h.disks[id] = filepath.Join(kept, "disk.qcow2")
	}
}

// Close removes the temporary directory, if Config.Dir was not given.
func (h *Host) Close() {
	if h.tempDir {
		_ = os.RemoveAll(h.cfg.Dir)
	}
}

// ParseForward reads a forward as the simulators' --guest-forward flag gives it: PORT=HOST:PORT.
func ParseForward(s string) (Forward, error) {
	port, target, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(port)
	if !ok || err != nil || n < 1 || n > 65535 || target == "" {
		return Forward{}, fmt.Errorf("%q: want PORT=HOST:PORT", s)
	}
	return Forward{Port: n, Target: target}, nil
}
