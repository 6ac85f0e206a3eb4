package pvesim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GuestForwardIP is the address a QEMU guest dials for the services its simulator forwards to it
// (QEMUGuest.Forwards): inside QEMU's user-mode network, outside the DHCP range, and not the host
// (10.0.2.2), which a restricted guest cannot reach.
const GuestForwardIP = "10.0.2.100"

// QEMUGuest makes a VM start boot a real operating system under QEMU instead of calling the
// BootHook: the VM's boot disk is a copy-on-write overlay of Image (as a linked clone's disk is of
// its template's), the NoCloud seed ISO attached to the VM is its CD-ROM, the guest's
// qemu-guest-agent answers the agent/* endpoints over a virtio-serial channel, and its network is
// QEMU's user-mode network with restrict=on, in which it reaches nothing but Forwards. A guest's
// power-off ends QEMU and the VM reads stopped; a stop or shutdown request reaches QEMU over QMP.
// TCG only: it runs where there is no KVM, slowly (a Debian guest takes about 90 s to reach
// cloud-init's runcmd on one vCPU).
type QEMUGuest struct {
	// Image is the qcow2 template image every VM boots (hack/template.sh builds HyperFleet's).
	Image string
	// Dir receives each VM's overlay, seed, sockets and serial console log (vm-<vmid>/); default
	// a temporary directory removed by Close.
	Dir string
	// Binary is the QEMU system emulator; default qemu-system-x86_64 from PATH.
	Binary string
	// MemoryMiB (default 1024) and CPUs (default 1) of every guest, whatever the VM's config says:
	// TCG gains nothing from more vCPUs on a small machine.
	MemoryMiB int
	CPUs      int
	// Forwards are the services a guest may reach, at GuestForwardIP; ForwardToGuests adds more.
	Forwards []GuestForward
	// KeepDisks keeps a destroyed VM's disk until Close, so a test can read what the guest left on
	// it (GuestDisk).
	KeepDisks bool
}

// GuestForward lets guests reach Target (host:port, on loopback) at GuestForwardIP:Port.
type GuestForward struct {
	Port   int
	Target string
}

// qemuState is the QEMU backend's runtime: its directory and the disks of VMs.
type qemuState struct {
	cfg     QEMUGuest
	tempDir bool
	socat   string

	mu       sync.Mutex
	forwards []GuestForward
	// disks is each VMID's overlay, live or (KeepDisks) kept after its VM was destroyed.
	disks   map[int]string
	removed int
}

func newQEMUState(cfg QEMUGuest) (*qemuState, error) {
	if cfg.Image == "" {
		return nil, errors.New("pvesim: QEMUGuest.Image is required")
	}
	if _, err := os.Stat(cfg.Image); err != nil {
		return nil, fmt.Errorf("pvesim: guest image: %w", err)
	}
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("pvesim: %s: %w (Debian: apt-get install qemu-system-x86)", cfg.Binary, err)
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return nil, fmt.Errorf("pvesim: qemu-img: %w (Debian: apt-get install qemu-utils)", err)
	}
	// QEMU's guestfwd runs a command per connection; socat joins it to the forwarded service.
	socat, err := exec.LookPath("socat")
	if err != nil {
		return nil, fmt.Errorf("pvesim: socat: %w (Debian: apt-get install socat)", err)
	}
	if cfg.MemoryMiB <= 0 {
		cfg.MemoryMiB = 1024
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	q := &qemuState{cfg: cfg, socat: socat, forwards: append([]GuestForward(nil), cfg.Forwards...), disks: map[int]string{}}
	if q.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "pvesim-guests-")
		if err != nil {
			return nil, err
		}
		q.cfg.Dir, q.tempDir = dir, true
	}
	if q.cfg.Image, err = filepath.Abs(q.cfg.Image); err != nil {
		return nil, err
	}
	return q, nil
}

// ForwardToGuests lets QEMU guests started from now on reach target (host:port on loopback) at
// GuestForwardIP:port. It is a no-op without the QEMU backend.
func (s *Simulator) ForwardToGuests(port int, target string) {
	if s.qemu == nil {
		return
	}
	s.qemu.mu.Lock()
	defer s.qemu.mu.Unlock()
	s.qemu.forwards = append(s.qemu.forwards, GuestForward{Port: port, Target: target})
}

// GuestDisk is the qcow2 overlay holding what vmid's guest wrote (with KeepDisks, also after the
// VM was destroyed); false without the QEMU backend or before the VM first started.
func (s *Simulator) GuestDisk(vmid int) (string, bool) {
	if s.qemu == nil {
		return "", false
	}
	s.qemu.mu.Lock()
	defer s.qemu.mu.Unlock()
	p, ok := s.qemu.disks[vmid]
	return p, ok
}

// GuestConsoleLog is the path of vmid's serial console log (the kernel's and systemd's output).
func (s *Simulator) GuestConsoleLog(vmid int) string {
	if s.qemu == nil {
		return ""
	}
	return filepath.Join(s.qemu.vmDir(vmid), "serial.log")
}

func (q *qemuState) vmDir(vmid int) string {
	return filepath.Join(q.cfg.Dir, fmt.Sprintf("vm-%d", vmid))
}

// qemuVM is one running QEMU process's control sockets.
type qemuVM struct {
	dir string
	qmp string
	qga string
}

// qemuBoot is what startBoot runs for a VM under the QEMU backend: it prepares the VM's disk and
// seed, runs QEMU until the guest powers off or ctx ends (a stop, a destroy, Close: QMP quit, then
// a kill), and returns. seed is the attached NoCloud ISO (nil: no CD-ROM), mac net0's MAC.
func (q *qemuState) qemuBoot(vmid int, seed []byte, mac string, agent bool, run *qemuVM, log func(string, ...any)) BootHook {
	return func(ctx context.Context, _ BootVM) error {
		if err := os.MkdirAll(run.dir, 0o700); err != nil {
			return err
		}
		disk := filepath.Join(run.dir, "disk.qcow2")
		if _, err := os.Stat(disk); errors.Is(err, os.ErrNotExist) {
			// A linked clone: the guest's writes land in the overlay, the template image stays as built.
			out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", q.cfg.Image, disk).CombinedOutput()
			if err != nil {
				return fmt.Errorf("qemu-img create: %v: %s", err, out)
			}
		}
		q.mu.Lock()
		q.disks[vmid] = disk
		forwards := append([]GuestForward(nil), q.forwards...)
		q.mu.Unlock()
		args := []string{
			"-name", fmt.Sprintf("vm%d", vmid),
			"-machine", "pc", "-accel", "tcg",
			"-smp", strconv.Itoa(q.cfg.CPUs), "-m", strconv.Itoa(q.cfg.MemoryMiB),
			"-nodefaults", "-no-user-config", "-display", "none",
			"-serial", "file:" + filepath.Join(run.dir, "serial.log"),
			"-qmp", "unix:" + run.qmp + ",server=on,wait=off",
			// Disks as Proxmox attaches them: scsi0 on virtio-scsi, the seed on ide3.
			"-device", "virtio-scsi-pci,id=scsihw0",
			"-drive", "file=" + disk + ",if=none,id=drive-scsi0,format=qcow2,discard=unmap,detect-zeroes=unmap",
			"-device", "scsi-hd,bus=scsihw0.0,drive=drive-scsi0,bootindex=100",
		}
		if seed != nil {
			iso := filepath.Join(run.dir, "seed.iso")
			if err := os.WriteFile(iso, seed, 0o600); err != nil {
				return err
			}
			args = append(args, "-drive", "file="+iso+",if=none,id=drive-ide3,media=cdrom,readonly=on",
				"-device", "ide-cd,bus=ide.1,unit=1,drive=drive-ide3")
		}
		if agent {
			args = append(args,
				"-chardev", "socket,id=qga0,path="+run.qga+",server=on,wait=off",
				"-device", "virtio-serial-pci,id=qga-serial",
				"-device", "virtserialport,bus=qga-serial.0,chardev=qga0,name=org.qemu.guest_agent.0")
		}
		netdev := "user,id=net0,restrict=on"
		for _, f := range forwards {
			netdev += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s - TCP:%s", GuestForwardIP, f.Port, q.socat, f.Target)
		}
		nic := "virtio-net-pci,netdev=net0,romfile="
		if mac != "" {
			nic += ",mac=" + mac
		}
		args = append(args, "-netdev", netdev, "-device", nic)

		logf, err := os.OpenFile(filepath.Join(run.dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer func() { _ = logf.Close() }()
		fmt.Fprintf(logf, "%s %s %s\n", time.Now().Format(time.RFC3339), q.cfg.Binary, strings.Join(args, " "))
		cmd := exec.Command(q.cfg.Binary, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting QEMU: %w", err)
		}
		log("QEMU guest started", "vmid", vmid, "pid", cmd.Process.Pid)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
			log("QEMU guest powered off", "vmid", vmid, "err", err)
			return err
		case <-ctx.Done():
		}
		// Powered off from outside: QMP's quit closes the disk cleanly; a QEMU that does not
		// answer is killed.
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, qerr := qmpCommand(qctx, run.qmp, "quit", nil)
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			log("QEMU did not quit; killing it", "vmid", vmid, "qmp", qerr)
			_ = cmd.Process.Kill()
			<-done
		}
		return ctx.Err()
	}
}

// forget drops vmid's disk when its VM is destroyed, or keeps it aside (KeepDisks).
func (q *qemuState) forget(vmid int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dir := q.vmDir(vmid)
	if _, ok := q.disks[vmid]; !ok {
		return
	}
	if !q.cfg.KeepDisks {
		delete(q.disks, vmid)
		go func() { _ = os.RemoveAll(dir) }()
		return
	}
	// The VMID may be reused: its next VM starts from a fresh overlay.
	q.removed++
	kept := fmt.Sprintf("%s.destroyed-%d", dir, q.removed)
	if err := os.Rename(dir, kept); err == nil {
		q.disks[vmid] = filepath.Join(kept, "disk.qcow2")
	}
}

func (q *qemuState) close() {
	if q.tempDir {
		_ = os.RemoveAll(q.cfg.Dir)
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
		if _, err = qgaCommand(ctx, q.qga, "guest-shutdown", nil); errors.Is(err, errAgentNotRunning) {
			_, err = qmpCommand(ctx, q.qmp, "system_powerdown", nil)
		} else {
			err = nil
		}
	} else {
		_, err = qmpCommand(ctx, q.qmp, "system_powerdown", nil)
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
	if _, err := qmpCommand(ctx, socket, "system_reset", nil); err != nil {
		s.log.Warn("QMP system_reset failed", "vmid", vmid, "err", err)
	}
}
