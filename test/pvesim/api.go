package pvesim

import (
	"fmt"
	"sort"
	"strings"
)

// VM is a snapshot of one simulated VM, for assertions in tests.
type VM struct {
	VMID        int
	Node        string
	Name        string
	Status      string // "running" or "stopped"
	Template    bool
	Tags        []string
	Lock        string
	Description string
	Cores       int
	MemoryMiB   int
	Pool        string
	IP          string // the guest's IPv4 address once it has run
	// Disks maps drive keys (scsi0, ide2, unused0) to their config values.
	Disks map[string]string
	// Net maps netN keys to their config values.
	Net map[string]string
	// Config is the whole config as PVE stores it (pending changes not applied).
	Config map[string]string
	// Pending holds changes queued while running ("" means delete).
	Pending map[string]string
	// Snapshots are the VM's snapshot names, oldest first; Parent the one the current state
	// derives from.
	Snapshots []string
	Parent    string
	// GuestData stands for what the guest wrote to its disks (WriteGuestData): snapshots keep it
	// and a rollback restores it.
	GuestData string
}

func (s *Simulator) snapshot(vm *vmState) VM {
	out := VM{
		VMID: vm.vmid, Node: vm.node, Name: vm.conf["name"], Status: vm.status, Template: vm.isTemplate(),
		Lock: vm.conf["lock"], Description: vm.conf["description"], Cores: atoiOr(vm.conf["cores"], 1),
		MemoryMiB: vm.memoryMiB(), IP: vm.ip,
		Disks: map[string]string{}, Net: map[string]string{}, Config: map[string]string{},
	}
	if t := vm.conf["tags"]; t != "" {
		out.Tags = strings.Split(t, ";")
	}
	for k, v := range vm.conf {
		out.Config[k] = v
		switch {
		case isDriveKey(k):
			out.Disks[k] = v
		case strings.HasPrefix(k, "net") && hotplugKeyRe.MatchString(k):
			out.Net[k] = v
		}
	}
	if len(vm.pending) > 0 {
		out.Pending = map[string]string{}
		for k, v := range vm.pending {
			out.Pending[k] = v
		}
	}
	for id, p := range s.pools {
		if p.members[vm.vmid] {
			out.Pool = id
		}
	}
	for _, sn := range vm.sortedSnapshots() {
		out.Snapshots = append(out.Snapshots, sn.name)
	}
	out.Parent, out.GuestData = vm.parent, vm.guestData
	return out
}

// VMs returns every VM and template, sorted by VMID.
func (s *Simulator) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []VM{}
	for _, vm := range s.sortedVMs() {
		out = append(out, s.snapshot(vm))
	}
	return out
}

// VM returns one VM by VMID.
func (s *Simulator) VM(vmid int) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return VM{}, false
	}
	return s.snapshot(vm), true
}

// WriteGuestData stands for the guest writing to its disks: snapshots keep the data and a
// rollback restores it.
func (s *Simulator) WriteGuestData(vmid int, data string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("pvesim: VM %d does not exist", vmid)
	}
	vm.guestData = data
	return nil
}

// IgnoreShutdown makes vmid's guest ignore ACPI shutdown requests (a hung or busy OS): a
// shutdown task then fails after its time with PVE's "VM quit/powerdown failed - got timeout"
// and only a stop powers the VM off.
func (s *Simulator) IgnoreShutdown(vmid int, ignore bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("pvesim: VM %d does not exist", vmid)
	}
	vm.ignoreShutdown = ignore
	return nil
}

// PowerOff is a guest-initiated shutdown (the OS halted): the VM stops at
// once, without a task, and its boot hook is cancelled.
func (s *Simulator) PowerOff(vmid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("pvesim: VM %d does not exist", vmid)
	}
	if vm.status != "running" {
		return fmt.Errorf("pvesim: VM %d is not running", vmid)
	}
	s.stopVM(vm)
	return nil
}

// RemoveVM deletes a VM out of band (someone removed it in the PVE UI),
// whatever its state, with its disks.
func (s *Simulator) RemoveVM(vmid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("pvesim: VM %d does not exist", vmid)
	}
	s.destroyVM(vm, false)
	return nil
}

// SetVMConfig writes one config key of a VM out of band, as an edit in the PVE UI (or an older
// client) would; an empty value removes the key.
func (s *Simulator) SetVMConfig(vmid int, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok {
		return fmt.Errorf("pvesim: VM %d does not exist", vmid)
	}
	if value == "" {
		delete(vm.conf, key)
	} else {
		vm.conf[key] = value
	}
	return nil
}

// SetNodeOnline takes a node offline (requests proxied to it fail with 595)
// or brings it back.
func (s *Simulator) SetNodeOnline(node string, online bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(node)
	if n == nil {
		return fmt.Errorf("pvesim: node %q does not exist", node)
	}
	n.online = online
	return nil
}

// StorageFile returns the content of a file on a storage (e.g. an uploaded
// cloud-init ISO) as seen from node.
func (s *Simulator) StorageFile(node, volid string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.getVolumeOn(node, volid)
	if v == nil {
		return nil, false
	}
	return append([]byte(nil), v.data...), true
}

// PutStorageFile places a file (e.g. a cicustom snippet) on a storage of a
// node, as an administrator copying it there would.
func (s *Simulator) PutStorageFile(node, volid string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	storeID, name, ok := strings.Cut(volid, ":")
	st := s.storage(storeID)
	if !ok || st == nil || !st.onNode(node) {
		return fmt.Errorf("pvesim: storage of %q not on node %q", volid, node)
	}
	content, _, _ := strings.Cut(name, "/")
	s.putVolume(node, &volume{storage: storeID, volid: volid, content: content, format: fileFormat(name),
		size: int64(len(data)), data: append([]byte(nil), data...)})
	return nil
}

// Volumes lists the volume IDs of disk images that belong to a VM (its vmid), on every node and
// storage, sorted: what the VM's disks hold in storage accounting, whether attached or unused.
func (s *Simulator) Volumes(vmid int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, v := range s.volumes {
		if v.vmid == vmid && v.content == "images" {
			out = append(out, v.volid)
		}
	}
	sort.Strings(out)
	return out
}

// ReadNoCloudSeed reads the files of a NoCloud seed ISO (volume label cidata), as a booting guest
// does: user-data, meta-data and, when present, network-config and vendor-data.
func ReadNoCloudSeed(iso []byte) (map[string][]byte, error) { return readNoCloudISO(iso) }
