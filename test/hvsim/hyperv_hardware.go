package hvsim

import (
	"regexp"
	"sort"
	"strings"
)

// Extra disks (Add-HFDisks) and network adapters (Set-HFAdapters), as the module runs them with
// New-VHD, Add-VMHardDiskDrive, Get-VMSwitch, Add-VMNetworkAdapter, Set-VMNetworkAdapter,
// Rename-VMNetworkAdapter, Connect-VMNetworkAdapter, Set-VMNetworkAdapterVlan and
// Remove-VMNetworkAdapter.

// VHDX's size limits: New-VHD refuses a disk outside them.
const (
	minVHDXSize = 3 << 20
	maxVHDXSize = 64 << 40
)

// newVHD is New-VHD: a dynamic disk of size bytes at path, or a differencing disk on parent. The
// file-exists text is Hyper-V's; the size text is the simulator's (Hyper-V's own may differ).
func (hh *hvHost) newVHD(path string, size int64, parent string) *hvError {
	if !isAbsWindowsPath(path) {
		return refuse("Invalid", "Cannot bind argument to parameter 'Path' because it is an empty or relative path.")
	}
	if hh.files[key(path)] != nil {
		return refuse("AlreadyExists", "Failed to create the virtual hard disk.\r\nThe system failed to create '%s': The file exists. (0x80070050).", path)
	}
	if parent == "" && (size < minVHDXSize || size > maxVHDXSize) {
		return refuse("Invalid", "Failed to create the virtual hard disk.\r\nThe size of '%s', %d bytes, is not valid: a VHDX holds 3 MB to 64 TB.", path, size)
	}
	hh.files[key(path)] = &hvFile{path: path, kind: "vhdx", parent: parent, size: size}
	return nil
}

// diskInUse reports whether a VM other than except has the disk at path.
func (hh *hvHost) diskInUse(path, except string) bool {
	for _, vm := range hh.vms {
		if vm.id == except {
			continue
		}
		for _, d := range vm.disks {
			if key(d) == key(path) {
				return true
			}
		}
	}
	return false
}

// extraDiskFile is Get-HFDiskFile.
func extraDiskFile(vm *hvVM, name string) string {
	return "hyperfleet-" + strings.ToLower(vm.id) + "-" + name + ".vhdx"
}

// bootDiskFile is Get-HFBootDiskFile: a full clone's copy of its template's disk.
func bootDiskFile(vm *hvVM) string {
	return "hyperfleet-" + strings.ToLower(vm.id) + ".vhdx"
}

// isExtraDiskOf is the filter Get-HFDiskFile $vm '*' of Remove-HFVM: the file is named as one of
// the VM's extra disks.
func isExtraDiskOf(vm *hvVM, path string) bool {
	leaf := strings.ToLower(path[strings.LastIndex(path, `\`)+1:])
	return strings.HasPrefix(leaf, "hyperfleet-"+strings.ToLower(vm.id)+"-") && strings.HasSuffix(leaf, ".vhdx")
}

// isDiskOf is Test-HFDiskOfVM: the file is named as the VM's full copy or one of its extra disks.
func isDiskOf(vm *hvVM, path string) bool {
	return strings.EqualFold(path[strings.LastIndex(path, `\`)+1:], bootDiskFile(vm)) || isExtraDiskOf(vm, path)
}

// configurableVM is Get-HFConfigurableVM: an owned VM that is off and not moving.
func (hh *hvHost) configurableVM(in hvInput) (*hvVM, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if vm.state != hvOff {
		return nil, refuse("Busy", "VM %s is not off (state %d); it is configured only while off", in.ID, vm.state)
	}
	return vm, nil
}

var diskNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// addDisks is Add-HFDisks.
func (h *HyperV) addDisks(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.configurableVM(in)
	if err != nil {
		return nil, err
	}
	type todo struct {
		name, path string
		size       int64
		lun        int
	}
	var todos []todo
	folders := map[string]string{}
	for _, d := range in.Disks {
		if !diskNameRe.MatchString(d.Name) {
			return nil, refuse("Invalid", "disk name '%s' is not a lowercase DNS label", d.Name)
		}
		file := extraDiskFile(vm, d.Name)
		if vm.hasDrive(file) {
			continue
		}
		folder := in.VHDDirectory
		if d.Storage != "" {
			if _, ok := folders[d.Storage]; !ok {
				f, err := hh.storageFolder(in, d.Storage)
				if err != nil {
					return nil, err
				}
				folders[d.Storage] = f
			}
			folder = folders[d.Storage]
		}
		if folder == "" {
			return nil, refuse("Invalid", "Cannot bind argument to parameter 'Path' because it is an empty string.")
		}
		todos = append(todos, todo{name: d.Name, path: strings.TrimRight(folder, `\`) + `\` + file, size: d.SizeBytes, lun: d.Lun})
	}
	var added []string
	for _, d := range todos {
		if taken, ok := vm.lunTaken(d.lun); ok {
			return nil, refuse("Invalid", "SCSI location 0:%d of VM %s, where disk %s goes, holds %s", d.lun, in.ID, d.name, taken)
		}
		if hh.files[key(d.path)] != nil {
			if hh.diskInUse(d.path, "") {
				return nil, refuse("AlreadyExists", "disk %s is in use by another VM", d.path)
			}
			delete(hh.files, key(d.path))
		}
		if err := hh.newVHD(d.path, d.size, ""); err != nil {
			return nil, err
		}
		if d.lun < 0 || d.lun > 63 {
			delete(hh.files, key(d.path)) // the module removes the disk Add-VMHardDiskDrive refused
			return nil, refuse("Invalid", "Cannot validate argument on parameter 'ControllerLocation'. The %d argument is greater than the maximum allowed range of 63.", d.lun)
		}
		vm.disks, vm.diskLUNs = append(vm.disks, d.path), append(vm.diskLUNs, d.lun)
		added = append(added, d.path)
	}
	return map[string]any{"Added": h.strings(added), "VM": h.vmJSON(vm)}, nil
}

// hasDrive reports whether one of the VM's drives holds a file named leaf.
func (vm *hvVM) hasDrive(leaf string) bool {
	for _, p := range append(append([]string(nil), vm.disks...), vm.dvds...) {
		if p != "" && strings.EqualFold(p[strings.LastIndex(p, `\`)+1:], leaf) {
			return true
		}
	}
	return false
}

// setAdapters is Set-HFAdapters.
func (h *HyperV) setAdapters(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.configurableVM(in)
	if err != nil {
		return nil, err
	}
	switches := make([]string, 0, len(hh.switches))
	for s := range hh.switches {
		switches = append(switches, s)
	}
	sort.Strings(switches)
	for _, n := range in.Adapters {
		if !containsFold(switches, n.SwitchName) {
			return nil, refuse("Invalid", "virtual switch '%s' of adapter %s does not exist on %s (its switches: %s)",
				n.SwitchName, n.Name, strings.ToUpper(hh.name), strings.Join(switches, ", "))
		}
	}
	// The cmdlets' own checks, which the module's input never fails.
	for _, n := range in.Adapters {
		if hh.switches[n.SwitchName] == nil {
			return nil, refuse("NotFound", "Unable to find a virtual switch with name '%s'.", n.SwitchName)
		}
		if n.VlanID < 0 || n.VlanID > 4094 {
			return nil, refuse("Invalid", "Cannot validate argument on parameter 'VlanId'. The %d argument is greater than the maximum allowed range of 4094.", n.VlanID)
		}
	}
	have := vm.adapters
	match := make([]*hvAdapter, len(in.Adapters))
	used := make([]bool, len(have))
	for i, n := range in.Adapters {
		for j, a := range have {
			if !used[j] && strings.EqualFold(a.mac, n.MacAddress) {
				match[i], used[j] = a, true
				break
			}
		}
	}
	var free []*hvAdapter
	for j, a := range have {
		if !used[j] {
			free = append(free, a)
		}
	}
	k := 0
	var added []*hvAdapter
	for i, n := range in.Adapters {
		a := match[i]
		if a == nil && k < len(free) {
			a = free[k]
			k++
		}
		if a == nil {
			a = &hvAdapter{}
			added = append(added, a)
		}
		a.name, a.switchName, a.mac, a.static, a.vlan = n.Name, n.SwitchName, strings.ToUpper(n.MacAddress), true, n.VlanID
	}
	removed := map[*hvAdapter]bool{}
	for ; k < len(free); k++ {
		removed[free[k]] = true
	}
	kept := make([]*hvAdapter, 0, len(have)+len(added))
	for _, a := range have {
		if !removed[a] {
			kept = append(kept, a)
		}
	}
	vm.adapters = append(kept, added...)
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

// AddSwitch adds a virtual switch to a host, as New-VMSwitch would.
func (h *HyperV) AddSwitch(host, name string) error {
	return h.withHost(host, func(hh *hvHost) error { hh.switches[name] = &hvSwitch{name: name, switchType: "External"}; return nil })
}

// AttachDisk puts a dynamic VHDX of sizeGiB at path (unless a file is there) and attaches it to a
// VM at the next free SCSI location, as someone with Hyper-V Manager could.
func (h *HyperV) AttachDisk(host, id, path string, sizeGiB int64) error {
	return h.withVM(host, id, func(hh *hvHost, vm *hvVM) error {
		if hh.files[key(path)] == nil {
			if err := hh.newVHD(path, sizeGiB<<30, ""); err != nil {
				return err
			}
		}
		vm.diskLUNs = append(vm.diskLUNs, vm.nextLUN())
		vm.disks = append(vm.disks, path)
		return nil
	})
}
