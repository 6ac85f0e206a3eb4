package hvsim

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// HyperV is the simulated Hyper-V side of the WS-Man simulator: hosts with their VMs, virtual
// disks (a differencing disk knows its parent), switches and files (seed ISOs, the deployed
// PowerShell module), all in memory. Each host gets its own Executor (HostExecutor) behind its own
// WS-Man endpoint, like one WinRM listener per Hyper-V host. It answers exactly the scripts the
// Hyper-V provider sends, the way Windows PowerShell 5.1 running HyperFleet's module would.
type HyperV struct {
	cfg HyperVConfig
	log *slog.Logger

	mu     sync.Mutex
	hosts  map[string]*hvHost
	boots  map[string]*hvBootRun
	faults []*hvFault
	// moveFaults: the next move from a host fails with this text.
	moveFaults map[string]string
	ipSeq      int
	calls      map[string]int
	wg         sync.WaitGroup
	closed     bool

	// foreign holds, by host, the statements of every script that was none of HyperFleet's.
	foreign map[string][]string

	// guests is the QEMU backend (HyperVConfig.Guest); guestErr why it could not start.
	guests   *qemuguest.Host
	guestErr error
}

// HyperVConfig configures the simulated hosts.
type HyperVConfig struct {
	// BootHook, when set, runs when a VM starts, with the user-data of the seed ISO in its DVD
	// drive; when it returns the guest powers off.
	BootHook HyperVBootHook
	// Guest, when set, boots every VM as a real guest under QEMU instead of calling BootHook: a
	// generation 2 VM with UEFI and Secure Boot, its disk an overlay of Guest.Image (the runner
	// template, qcow2 or the .vhdx made from it), the seed ISO in its DVD drive (hyperv_qemu.go).
	Guest *qemuguest.Config
	// PS51Quirks makes answers take the shapes Windows PowerShell 5.1 gives values that are not
	// forced by the script: one-element arrays unwrapped to their element, empty arrays as null,
	// dates as "/Date(ms)/". HyperFleet's decoder must read both forms.
	PS51Quirks bool
	// Latency is added to every command.
	Latency time.Duration
	// MergeDuration is how long Hyper-V merges a removed checkpoint's disk in the background
	// (300ms when zero).
	MergeDuration time.Duration
	// MoveDuration is how long a move's migration job runs (500ms when zero).
	MoveDuration time.Duration
	Logger       *slog.Logger
}

type hvHost struct {
	name     string
	cpus     int
	memory   int64
	version  string
	switches map[string]*hvSwitch
	files    map[string]*hvFile // by lower-cased path
	vms      map[string]*hvVM   // by lower-case GUID
	// migration is live migration's switch (off until enabled, as on Hyper-V), processor the
	// host's processor model, missing the folders that are not there, moves its migration jobs.
	migration bool
	processor string
	missing   []string
	moves     []*hvMove
	// net is the host's own networking (hyperv_network.go), dirs the folders made explicitly
	// (hyperv_storage.go).
	net  hvHostNet
	dirs map[string]string
	// volumes are the sizes of the volumes added (AddVolume) by their lower-cased mount point.
	volumes map[string]int64
}

// hvFile is a file on a host: a virtual disk (vhdx, with its parent for a differencing disk), an
// ISO or any other file (the module's).
type hvFile struct {
	path   string
	kind   string // "vhdx", "iso" or "file"
	parent string
	size   int64
	data   []byte
}

// hvAdapter is a VM's network adapter: its name ("Network Adapter" for the one New-VM makes), the
// switch it is connected to ("" when not connected), its VLAN in access mode (0 untagged) and its
// MAC as Hyper-V writes it (twelve hex digits), static or assigned by the host.
type hvAdapter struct {
	name       string
	switchName string
	vlan       int
	mac        string
	static     bool
	// acls are its extended port ACLs, maxBandwidth its cap in bits per second (0 for none).
	acls         []hvACL
	maxBandwidth int64
}

type hvVM struct {
	id, name, notes string
	dir             string
	state           int
	generation      int
	cpus            int
	memory          int64
	secureBoot      string
	created         time.Time
	started         time.Time
	disks           []string
	dvds            []string // one entry per DVD drive; "" for an empty drive
	// diskLUNs and dvdLUNs are the drives' locations on SCSI controller 0, parallel to disks and dvds.
	diskLUNs        []int
	dvdLUNs         []int
	adapters        []*hvAdapter
	ip              string
	boot            int // increases with every start, so a stale guest cannot stop a new boot
	checkpointType  string
	checkpoints     []*hvCheckpoint
	current         string    // the checkpoint the running state derives from
	mergeUntil      time.Time // a removed checkpoint's disk is merged until then
	processorCompat bool
	moving          string // the migration job moving the VM
}

// VM states as the module reports them ([int] of Microsoft.HyperV.PowerShell.VMState).
const (
	hvRunning  = 2
	hvOff      = 3
	hvStopping = 4
)

// NewHyperV returns an empty set of hosts.
func NewHyperV(cfg HyperVConfig) *HyperV {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HyperV{cfg: cfg, log: log, hosts: map[string]*hvHost{}, boots: map[string]*hvBootRun{}, calls: map[string]int{}, foreign: map[string][]string{}, moveFaults: map[string]string{}}
	if cfg.Guest != nil {
		// A backend that cannot run refuses every start with the reason (GuestErr says it first).
		h.guests, h.guestErr = qemuguest.New(*cfg.Guest)
		if h.guestErr == nil {
			h.guestErr = qemuguest.CheckFirmware(qemuguest.UEFISecureBoot)
		}
	}
	return h
}

// GuestErr is why the QEMU backend (HyperVConfig.Guest) cannot boot guests here, if it cannot.
func (h *HyperV) GuestErr() error { return h.guestErr }

// AddHost adds a host with cpus logical processors, memoryMiB of memory and the given switches.
func (h *HyperV) AddHost(name string, cpus int, memoryMiB int64, switches ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	host := &hvHost{name: name, cpus: cpus, memory: memoryMiB << 20, version: "10.0.20348", processor: "Intel(R) Xeon(R) Gold 6338",
		switches: map[string]*hvSwitch{}, files: map[string]*hvFile{}, vms: map[string]*hvVM{}, dirs: map[string]string{}, net: newHostNet(), volumes: map[string]int64{}}
	for _, s := range switches {
		host.switches[s] = &hvSwitch{name: s, switchType: "External"}
	}
	h.hosts[name] = host
}

// Hosts lists the host names, sorted.
func (h *HyperV) Hosts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.hosts))
	for n := range h.hosts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// AddTemplateDisk puts a base VHDX of sizeGiB at path, e.g. a template disk in the template folder.
func (h *HyperV) AddTemplateDisk(host, path string, sizeGiB int64) error {
	return h.withHost(host, func(hh *hvHost) error {
		hh.files[key(path)] = &hvFile{path: path, kind: "vhdx", size: sizeGiB << 30}
		return nil
	})
}

// AddTemplateVM adds a VM marked as a HyperFleet template named name, on a base disk at vhdPath.
func (h *HyperV) AddTemplateVM(host, name, vhdPath string, cpus int, memoryMiB int64, tags ...string) (string, error) {
	notes := "Runner template.\n\n```hyperfleet-template\nname: " + name + "\ntags: " + strings.Join(tags, ",") + "\n```"
	var id string
	err := h.withHost(host, func(hh *hvHost) error {
		hh.files[key(vhdPath)] = &hvFile{path: vhdPath, kind: "vhdx", size: 20 << 30}
		vm := hh.newVM(name+"-template", `C:\Templates`)
		vm.notes, vm.cpus, vm.memory, vm.disks, vm.diskLUNs = notes, cpus, memoryMiB<<20, []string{vhdPath}, []int{0}
		id = vm.id
		return nil
	})
	return id, err
}

// AddVM adds a VM that HyperFleet did not create (notes may forge anything), powered on or off.
func (h *HyperV) AddVM(host, name, notes string, running bool) (string, error) {
	var id string
	err := h.withHost(host, func(hh *hvHost) error {
		vm := hh.newVM(name, `C:\VMs`)
		vm.notes = notes
		if running {
			vm.state, vm.started = hvRunning, time.Now()
		}
		id = vm.id
		return nil
	})
	return id, err
}

// SetNotes rewrites a VM's Notes, as someone with Hyper-V Manager could.
func (h *HyperV) SetNotes(host, id, notes string) error {
	return h.withVM(host, id, func(_ *hvHost, vm *hvVM) error { vm.notes = notes; return nil })
}

// InstallModule writes module files into dir as an older deploy (or an operator) would have.
func (h *HyperV) InstallModule(host, dir string, files map[string][]byte) error {
	return h.withHost(host, func(hh *hvHost) error {
		for name, data := range files {
			p := strings.TrimRight(dir, `\`) + `\` + name
			hh.files[key(p)] = &hvFile{path: p, kind: "file", data: append([]byte(nil), data...), size: int64(len(data))}
		}
		return nil
	})
}

// RemoveFile deletes a file from a host, as an operator cleaning up could.
func (h *HyperV) RemoveFile(host, path string) error {
	return h.withHost(host, func(hh *hvHost) error { delete(hh.files, key(path)); return nil })
}

// HyperVVM is a snapshot of a simulated VM, for assertions.
type HyperVVM struct {
	ID, Name, Notes string
	State           int
	CPUs            int
	MemoryMiB       int64
	Disks, DVDs     []string
	// DiskLUNs are the disks' locations on SCSI controller 0, in the order of Disks.
	DiskLUNs []int
	// Switch and VLAN are the first adapter's.
	Switch     string
	VLAN       int
	Adapters   []HyperVAdapter
	IP         string
	SecureBoot string
}

// HyperVAdapter is a snapshot of a VM's network adapter.
type HyperVAdapter struct {
	Name, Switch, MAC string
	VLAN              int
	StaticMAC         bool
	// ACLs are its extended port ACLs, heaviest first; MaxBandwidth its cap in bits per second.
	ACLs         []HyperVACL
	MaxBandwidth int64
}

// HyperVFile is a snapshot of a file on a host.
type HyperVFile struct {
	Path, Kind, Parent string
	Size               int64
	Data               []byte
}

// VMs returns the host's VMs sorted by name.
func (h *HyperV) VMs(host string) []HyperVVM {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return nil
	}
	out := make([]HyperVVM, 0, len(hh.vms))
	for _, vm := range hh.vms {
		s := HyperVVM{ID: vm.id, Name: vm.name, Notes: vm.notes, State: vm.state, CPUs: vm.cpus, MemoryMiB: vm.memory >> 20,
			Disks: append([]string(nil), vm.disks...), DVDs: append([]string(nil), vm.dvds...), DiskLUNs: append([]int(nil), vm.diskLUNs...),
			IP: vm.ip, SecureBoot: vm.secureBoot}
		if len(vm.adapters) > 0 {
			s.Switch, s.VLAN = vm.adapters[0].switchName, vm.adapters[0].vlan
		}
		for _, a := range vm.adapters {
			s.Adapters = append(s.Adapters, HyperVAdapter{Name: a.name, Switch: a.switchName, MAC: a.mac, VLAN: a.vlan, StaticMAC: a.static,
				ACLs: aclSnapshot(a.acls), MaxBandwidth: a.maxBandwidth})
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// File returns a host's file; ok is false when it does not exist.
func (h *HyperV) File(host, path string) (HyperVFile, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return HyperVFile{}, false
	}
	f, ok := hh.files[key(path)]
	if !ok {
		return HyperVFile{}, false
	}
	return HyperVFile{Path: f.path, Kind: f.kind, Parent: f.parent, Size: f.size, Data: append([]byte(nil), f.data...)}, true
}

// Files lists a host's file paths, sorted.
func (h *HyperV) Files(host string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return nil
	}
	out := make([]string, 0, len(hh.files))
	for _, f := range hh.files {
		out = append(out, f.path)
	}
	sort.Strings(out)
	return out
}

// Calls returns how many times each module function (or script kind) ran, keyed "host/function".
func (h *HyperV) Calls() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.calls))
	for k, v := range h.calls {
		out[k] = v
	}
	return out
}

// ForeignStatements returns the statements, as PowerShell splits them and as they were sent, of
// every script host received that is none of the scripts HyperFleet sends: what a host would
// have run beyond HyperFleet's own code. A test that plays an attacker expects none.
func (h *HyperV) ForeignStatements(host string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.foreign[host]...)
}

// recordForeign keeps the statements of a script the simulator does not know, without the
// client's own progress preference.
func (h *HyperV) recordForeign(host string, statements []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range statements {
		if s != "$ProgressPreference = 'SilentlyContinue'" {
			h.foreign[host] = append(h.foreign[host], s)
		}
	}
}

// Close stops every running guest and waits for the boot hooks to return.
func (h *HyperV) Close() {
	h.mu.Lock()
	h.closed = true
	for _, b := range h.boots {
		b.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
	if h.guests != nil {
		h.guests.Close()
	}
}

func (h *HyperV) withHost(host string, fn func(*hvHost) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return fmt.Errorf("no host %q", host)
	}
	return fn(hh)
}

func (h *HyperV) withVM(host, id string, fn func(*hvHost, *hvVM) error) error {
	return h.withHost(host, func(hh *hvHost) error {
		vm := hh.vms[strings.ToLower(id)]
		if vm == nil {
			return fmt.Errorf("no VM %s on %s", id, host)
		}
		return fn(hh, vm)
	})
}

// newVM is New-VM: a generation 2 VM with one network adapter, "Network Adapter", connected to
// no switch, with a MAC the host assigns.
func (hh *hvHost) newVM(name, dir string) *hvVM {
	vm := &hvVM{id: uuid.NewString(), name: name, dir: dir, state: hvOff, generation: 2, cpus: 1, memory: 1 << 30,
		created: time.Now().UTC(), checkpointType: "Production"}
	vm.adapters = []*hvAdapter{{name: "Network Adapter", mac: "00155D" + strings.ToUpper(vm.id[:6])}}
	hh.vms[vm.id] = vm
	return vm
}

// lunTaken reports the drive at location lun of SCSI controller 0, "" when it is free.
func (vm *hvVM) lunTaken(lun int) (string, bool) {
	for i, l := range vm.diskLUNs {
		if l == lun {
			return vm.disks[i], true
		}
	}
	for i, l := range vm.dvdLUNs {
		if l == lun {
			return vm.dvds[i], true
		}
	}
	return "", false
}

// nextLUN is the first free location of SCSI controller 0, where Add-VMDvdDrive puts a drive.
func (vm *hvVM) nextLUN() int {
	for l := 0; ; l++ {
		if _, taken := vm.lunTaken(l); !taken {
			return l
		}
	}
}

// key is a path's map key: Windows paths compare case-insensitively.
func key(path string) string { return strings.ToLower(path) }

// usedMemory is the memory of the host's running VMs.
func (hh *hvHost) usedMemory() int64 {
	var used int64
	for _, vm := range hh.vms {
		if vm.state != hvOff && vm.state != hvSaved {
			used += vm.memory
		}
	}
	return used
}

// hvFault is an injected failure of the next matching call.
type hvFault struct {
	host, function string
	class, message string
	// crash makes the call fail outside the module's envelope: a terminating error on stderr.
	crash bool
}

// FailNext makes the next call of function ("New-HFVM", ...) on host ("" for any) answer with an
// error of class ("Busy", "Failed", ...) in the module's envelope.
func (h *HyperV) FailNext(host, function, class, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, &hvFault{host: host, function: function, class: class, message: message})
}

// CrashNext makes the next call of function on host fail with a terminating PowerShell error
// (CLIXML on stderr, exit code 1), as a module that could not load or a broken host would.
func (h *HyperV) CrashNext(host, function, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, &hvFault{host: host, function: function, message: message, crash: true})
}

func (h *HyperV) takeFault(host, function string) *hvFault {
	for i, f := range h.faults {
		if (f.host == "" || f.host == host) && f.function == function {
			h.faults = append(h.faults[:i], h.faults[i+1:]...)
			return f
		}
	}
	return nil
}

// WriteFile puts a file on a host, as an upload does.
func (h *HyperV) WriteFile(host, path string, data []byte) error {
	return h.withHost(host, func(hh *hvHost) error {
		hh.writeFile(path, data)
		return nil
	})
}

// writeFile stores data at path; the extension decides the kind.
func (hh *hvHost) writeFile(path string, data []byte) {
	kind := "file"
	switch {
	case strings.HasSuffix(strings.ToLower(path), ".iso"):
		kind = "iso"
	case strings.HasSuffix(strings.ToLower(path), ".vhdx"):
		kind = "vhdx"
	}
	hh.files[key(path)] = &hvFile{path: path, kind: kind, data: append([]byte(nil), data...), size: int64(len(data))}
}
