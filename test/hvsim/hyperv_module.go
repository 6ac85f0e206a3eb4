package hvsim

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// hvInput is the JSON argument of a module function; each function reads the fields it needs.
type hvInput struct {
	ID                     string `json:"Id"`
	Name                   string
	DiskName               string
	ParentPath             string
	VHDDirectory           string
	VMDirectory            string
	TemplateDirectory      string
	SeedDirectory          string
	SeedPath               string
	SeedArchivePath        string
	SeedSHA256             string
	Notes                  string
	SwitchName             string
	VlanID                 int `json:"VlanId"`
	Cores                  int
	MemoryMiB              int64
	DiskSizeBytes          int64
	SecureBootTemplate     string
	Mode                   string
	WithMemory             bool
	Start                  bool
	Hosts                  []string
	Target                 string
	Online                 bool
	IncludeStorage         bool
	DestinationStoragePath string
	JobID                  string `json:"JobId"`
	Expect                 struct{ Installation, OwnerTag, ClaimID string }
	Disks                  []struct {
		Name      string
		SizeBytes int64
		Lun       int
		Storage   string
	}
	Adapters []struct {
		Name, SwitchName, MacAddress string
		VlanID                       int `json:"VlanId"`
	}
	// Networks, port policies and storages.
	Kind             string
	Owner            hvOwner
	ScopeDescription string
	Subnets          []hvSubnetInput
	IPAddress        string
	ClientID         string `json:"ClientId"`
	Remove           bool
	MacAddress       string
	Acls             []string
	MaximumBandwidth int64
	IndexPath        string
	Path             string
	Adopt            bool
	Marker           string
	// Full clones and disks on directory storages.
	Full         bool
	Storage      string
	StorageIndex string
}

// hvError is a module function's refusal or a cmdlet's failure, reported in the envelope.
type hvError struct{ class, message string }

func (e *hvError) Error() string { return e.message }

func refuse(class, format string, args ...any) *hvError {
	return &hvError{class: class, message: fmt.Sprintf(format, args...)}
}

// call runs one module function as the deployed module would, after Import-Module's checks.
func (e *HostExecutor) call(ctx context.Context, psd1, version, function, arg string) ([]byte, []byte, int) {
	h := e.hv
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[e.host]
	h.calls[e.host+"/"+function]++
	dir := psd1[:max(strings.LastIndex(psd1, `\`), 0)]
	manifest, okd := hh.files[key(psd1)]
	_, okm := hh.files[key(dir+`\HyperFleetHyperV.psm1`)]
	if !okd || !okm || manifestVersion(manifest.data) != version {
		return nil, psErrorRecord(fmt.Sprintf("Import-Module : The specified module '%s' with version '%s' was not loaded because no valid module file was found in any module directory.", psd1, version),
			"ResourceUnavailable", "Modules_ModuleWithVersionNotFound,Microsoft.PowerShell.Commands.ImportModuleCommand"), 1
	}
	if !manifestExports(manifest.data)[function] {
		return nil, psCommandNotFoundAt(function, function+" -InputBase64 '"+arg+"'", 3, 1), 1
	}
	if f := h.takeFault(e.host, function); f != nil {
		if f.crash {
			return nil, psErrorRecord(f.message, "NotSpecified", "RuntimeException"), 1
		}
		return h.envelope(nil, &hvError{class: f.class, message: f.message}), nil, 0
	}
	var in hvInput
	raw, err := base64.StdEncoding.DecodeString(arg)
	if err == nil {
		err = json.Unmarshal(raw, &in)
	}
	if err != nil {
		return h.envelope(nil, refuse("Failed", "Invalid JSON primitive: %v", err)), nil, 0
	}
	var data any
	var herr *hvError
	switch function {
	case "Get-HFInventory":
		data = h.inventory(hh)
	case "Get-HFVM":
		data, herr = h.getVM(hh, in)
	case "Find-HFTemplate":
		data = h.findTemplate(hh, in)
	case "New-HFVM":
		data, herr = h.newVM(hh, in)
	case "Set-HFVM":
		data, herr = h.setVM(hh, in)
	case "Start-HFVM":
		data, herr = h.startVM(hh, in)
	case "Stop-HFVM":
		data, herr = h.stopVM(hh, in)
	case "Remove-HFVM":
		data, herr = h.removeVM(hh, in)
	case "Dismount-HFSeed":
		data, herr = h.dismountSeed(hh, in)
	case "Add-HFDisks":
		data, herr = h.addDisks(hh, in)
	case "Set-HFAdapters":
		data, herr = h.setAdapters(hh, in)
	case "Get-HFCheckpoints":
		data, herr = h.getCheckpoints(hh, in)
	case "New-HFCheckpoint":
		data, herr = h.newCheckpoint(hh, in)
	case "Restore-HFCheckpoint":
		data, herr = h.restoreCheckpoint(hh, in)
	case "Remove-HFCheckpoint":
		data, herr = h.removeCheckpoint(hh, in)
	case "Test-HFMove":
		data, herr = h.testMove(hh, in)
	case "Start-HFMove":
		data, herr = h.startMove(hh, in)
	case "Get-HFMove":
		data, herr = h.getMove(hh, in)
	case "Stop-HFMove":
		data, herr = h.stopMove(hh, in)
	case "Set-HFVirtualNetwork":
		data, herr = h.setNetwork(hh, in)
	case "Remove-HFVirtualNetwork":
		data, herr = h.removeNetwork(hh, in)
	case "Set-HFReservation":
		data, herr = h.setReservation(hh, in)
	case "Set-HFPortPolicy":
		data, herr = h.setPortPolicy(hh, in)
	case "Set-HFStorage":
		data, herr = h.setStorage(hh, in)
	case "Remove-HFStorage":
		data, herr = h.removeStorage(hh, in)
	case "Get-HFStorage":
		data, herr = h.getStorage(hh, in)
	default:
		return nil, psCommandNotFoundAt(function, function+" -InputBase64 '"+arg+"'", 3, 1), 1
	}
	_ = ctx
	return h.envelope(data, herr), nil, 0
}

// envelope renders {"Ok":true,"Data":...} or the refusal, as ConvertTo-Json -Compress writes it.
func (h *HyperV) envelope(data any, err *hvError) []byte {
	var v any
	if err != nil {
		v = map[string]any{"Ok": false, "Class": err.class, "Message": err.message}
	} else {
		v = map[string]any{"Ok": true, "Data": data}
	}
	out, mErr := json.Marshal(v)
	if mErr != nil {
		out = []byte(`{"Ok":false,"Class":"Failed","Message":"ConvertTo-Json failed"}`)
	}
	return append(out, '\r', '\n')
}

// list renders an array the way 5.1 does when a script does not force it (with PS51Quirks).
func (h *HyperV) list(items []any) any {
	if h.cfg.PS51Quirks {
		switch len(items) {
		case 0:
			return nil
		case 1:
			return items[0]
		}
	}
	if items == nil {
		return []any{}
	}
	return items
}

func (h *HyperV) strings(items []string) any {
	out := make([]any, 0, len(items))
	for _, s := range items {
		out = append(out, s)
	}
	return h.list(out)
}

func (h *HyperV) date(t time.Time) string {
	if h.cfg.PS51Quirks {
		return fmt.Sprintf("/Date(%d)/", t.UnixMilli())
	}
	return t.UTC().Format("2006-01-02T15:04:05.0000000Z")
}

// vmJSON is ConvertTo-HFVM.
func (h *HyperV) vmJSON(vm *hvVM) map[string]any {
	var ips, macs, dvds []string
	if vm.state == hvRunning && vm.ip != "" {
		ips = []string{vm.ip, "fe80::215:5dff:fe00:" + vm.id[:4]}
	}
	sw, vlan := "", 0
	for _, a := range vm.adapters {
		macs = append(macs, a.mac)
		if sw == "" && a.switchName != "" {
			sw, vlan = a.switchName, a.vlan
		}
	}
	for _, d := range vm.dvds {
		if d != "" {
			dvds = append(dvds, d)
		}
	}
	var uptime, assigned int64
	if vm.state == hvRunning {
		uptime, assigned = int64(time.Since(vm.started).Seconds()), vm.memory
	}
	return map[string]any{
		"Id": vm.id, "Name": vm.name, "State": vm.state, "Notes": vm.notes, "Generation": vm.generation,
		"ProcessorCount": vm.cpus, "MemoryStartupBytes": vm.memory, "MemoryAssignedBytes": assigned,
		"UptimeSeconds": uptime, "CreationTime": h.date(vm.created),
		"IPAddresses": h.strings(ips), "MacAddresses": h.strings(macs), "SwitchName": sw, "VlanId": vlan,
		"DvdPaths": h.strings(dvds), "HardDiskPaths": h.strings(vm.disks), "Merging": vm.merging(), "Migrating": vm.moving != "",
	}
}

func (h *HyperV) inventory(hh *hvHost) any {
	vms := make([]any, 0, len(hh.vms))
	for _, vm := range sortedVMs(hh) {
		vms = append(vms, h.vmJSON(vm))
	}
	return map[string]any{
		"Host": map[string]any{"Name": strings.ToUpper(hh.name), "Version": hh.version, "LogicalProcessors": hh.cpus,
			"MemoryBytes": hh.memory, "FreeMemoryBytes": hh.memory - hh.usedMemory()},
		"VMs": h.list(vms),
	}
}

func (h *HyperV) getVM(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.vmByID(in.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

func (h *HyperV) findTemplate(hh *hvHost, in hvInput) any {
	var found []any
	for _, vm := range sortedVMs(hh) {
		kv := notesBlock(vm.notes, "```hyperfleet-template")
		if kv == nil || (in.Name != "*" && kv["name"] != in.Name) || len(vm.disks) == 0 {
			continue
		}
		disk := hh.files[key(vm.disks[0])]
		if disk == nil {
			continue
		}
		found = append(found, map[string]any{"Kind": "VM", "Id": vm.id, "Name": in.Name, "Tags": kv["tags"],
			"VHDPath": disk.path, "SizeBytes": disk.size, "ProcessorCount": vm.cpus, "MemoryStartupBytes": vm.memory})
	}
	if in.TemplateDirectory != "" && in.Name != "*" {
		if f := hh.files[key(strings.TrimRight(in.TemplateDirectory, `\`)+`\`+in.Name+".vhdx")]; f != nil && f.kind == "vhdx" {
			found = append(found, map[string]any{"Kind": "VHDX", "Id": "", "Name": in.Name, "Tags": "",
				"VHDPath": f.path, "SizeBytes": f.size, "ProcessorCount": 0, "MemoryStartupBytes": 0})
		}
	}
	return map[string]any{"Templates": h.list(found)}
}

// validateHardware refuses what New-VM, Set-VMProcessor, Set-VMMemory, Connect-VMNetworkAdapter
// and Set-VMNetworkAdapterVlan refuse.
func (hh *hvHost) validateHardware(in hvInput, name string) *hvError {
	if in.Cores < 0 || in.Cores > hh.cpus {
		return refuse("Invalid", "Failed to modify device 'Processor'. The processor count %d is invalid for '%s': the host has %d logical processors.", in.Cores, name, hh.cpus)
	}
	if mem := in.MemoryMiB << 20; in.MemoryMiB != 0 && (mem < 32<<20 || mem%(2<<20) != 0) {
		return refuse("Invalid", "Failed to modify device 'Memory'. Invalid startup memory amount assigned for '%s'. The minimum amount of memory you can assign to this virtual machine is '32' MB and it must be a multiple of 2 MB.", name)
	}
	if in.SwitchName != "" && hh.switches[in.SwitchName] == nil {
		return refuse("NotFound", "Unable to find a virtual switch with name '%s'.", in.SwitchName)
	}
	if in.VlanID < 0 || in.VlanID > 4094 {
		return refuse("Invalid", "Cannot validate argument on parameter 'VlanId'. The %d argument is greater than the maximum allowed range of 4094.", in.VlanID)
	}
	return nil
}

func (hh *hvHost) applyHardware(vm *hvVM, in hvInput) {
	if in.Cores > 0 {
		vm.cpus = in.Cores
	}
	if in.MemoryMiB > 0 {
		vm.memory = in.MemoryMiB << 20
	}
	if in.SwitchName != "" {
		if len(vm.adapters) == 0 {
			vm.adapters = append(vm.adapters, &hvAdapter{name: "Network Adapter", mac: "00155D" + strings.ToUpper(vm.id[:6])})
		}
		vm.adapters[0].switchName, vm.adapters[0].vlan = in.SwitchName, in.VlanID
	}
}

func (h *HyperV) newVM(hh *hvHost, in hvInput) (any, *hvError) {
	if in.Expect.ClaimID == "" {
		return nil, refuse("Invalid", "a clone needs the claim ID it is made for")
	}
	var made *hvVM
	for _, vm := range sortedVMs(hh) {
		if vm.name == in.Name && owned(vm, in) {
			made = vm
			break
		}
	}
	if made != nil && !(in.Full && len(made.disks) == 0) {
		return map[string]any{"Created": false, "VM": h.vmJSON(made)}, nil
	}
	if len(in.Name) > 100 || (!in.Full && in.DiskName == "") || strings.ContainsAny(in.DiskName, `\/:`) {
		return nil, refuse("Invalid", "Cannot validate argument on parameter 'Name'.")
	}
	parent := hh.files[key(in.ParentPath)]
	if parent == nil || parent.kind != "vhdx" {
		return nil, refuse("NotFound", "template disk %s does not exist on %s", in.ParentPath, strings.ToUpper(hh.name))
	}
	if !isAbsWindowsPath(in.VHDDirectory) || !isAbsWindowsPath(in.VMDirectory) {
		return nil, refuse("Invalid", "Cannot bind argument to parameter 'Path' because it is an empty or relative path.")
	}
	if err := hh.validateHardware(in, in.Name); err != nil {
		return nil, err
	}
	if in.Full {
		folder := in.VHDDirectory
		if in.Storage != "" {
			f, err := hh.storageFolder(in, in.Storage)
			if err != nil {
				return nil, err
			}
			folder = f
		}
		if made != nil {
			hh.addFullCopy(made, parent, folder)
			return map[string]any{"Created": false, "VM": h.vmJSON(made)}, nil
		}
		vm := hh.newVM(in.Name, in.VMDirectory)
		vm.notes, vm.secureBoot = in.Notes, in.SecureBootTemplate
		hh.applyHardware(vm, in)
		hh.addFullCopy(vm, parent, folder)
		return map[string]any{"Created": true, "VM": h.vmJSON(vm)}, nil
	}
	child := strings.TrimRight(in.VHDDirectory, `\`) + `\` + in.DiskName
	if hh.files[key(child)] != nil {
		if hh.diskInUse(child, "") {
			return nil, refuse("AlreadyExists", "disk %s is in use by another VM", child)
		}
		delete(hh.files, key(child))
	}
	if err := hh.newVHD(child, parent.size, parent.path); err != nil {
		return nil, err
	}
	vm := hh.newVM(in.Name, in.VMDirectory)
	vm.notes, vm.disks, vm.diskLUNs, vm.secureBoot = in.Notes, []string{child}, []int{0}, in.SecureBootTemplate
	hh.applyHardware(vm, in)
	return map[string]any{"Created": true, "VM": h.vmJSON(vm)}, nil
}

// addFullCopy is Add-HFFullCopy: Copy-Item of the template's disk into folder, named by the VM's
// GUID (a copy a call cut short left is replaced), attached at SCSI 0:0.
func (hh *hvHost) addFullCopy(vm *hvVM, parent *hvFile, folder string) {
	path := strings.TrimRight(folder, `\`) + `\` + bootDiskFile(vm)
	hh.files[key(path)] = &hvFile{path: path, kind: parent.kind, size: parent.size, data: append([]byte(nil), parent.data...)}
	vm.disks, vm.diskLUNs = append([]string{path}, vm.disks...), append([]int{0}, vm.diskLUNs...)
}

func (h *HyperV) setVM(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.configurableVM(in)
	if err != nil {
		return nil, err
	}
	if err := hh.validateHardware(in, vm.name); err != nil {
		return nil, err
	}
	if in.SeedArchivePath != "" {
		if err := hh.expandSeed(in); err != nil {
			return nil, err
		}
	}
	if in.SeedPath != "" {
		if f := hh.files[key(in.SeedPath)]; f == nil {
			return nil, refuse("NotFound", "seed ISO %s does not exist on %s", in.SeedPath, strings.ToUpper(hh.name))
		}
	}
	hh.applyHardware(vm, in)
	if in.Notes != "" {
		vm.notes = in.Notes
	}
	if in.DiskSizeBytes > 0 && len(vm.disks) > 0 {
		if d := hh.files[key(vm.disks[0])]; d != nil && d.size < in.DiskSizeBytes {
			d.size = in.DiskSizeBytes
		}
	}
	if in.SeedPath != "" {
		if len(vm.dvds) > 0 {
			vm.dvds[0] = in.SeedPath
		} else {
			vm.dvdLUNs = append(vm.dvdLUNs, vm.nextLUN())
			vm.dvds = append(vm.dvds, in.SeedPath)
		}
	}
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

func (h *HyperV) startVM(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if vm.state != hvRunning {
		if hh.memory-hh.usedMemory() < vm.memory {
			return nil, refuse("Busy", "'%s' failed to start. Not enough memory in the system to start the virtual machine %s.", vm.name, vm.name)
		}
		if h.guestErr != nil {
			return nil, refuse("Busy", "'%s' failed to start: %v", vm.name, h.guestErr)
		}
		if h.guests != nil {
			if _, err := guestFirmware(vm); err != nil {
				return nil, refuse("Invalid", "'%s' failed to start: %v", vm.name, err)
			}
		}
		vm.state, vm.started = hvRunning, time.Now()
		vm.boot++
		if h.guests == nil {
			h.ipSeq++
			vm.ip = fmt.Sprintf("10.77.%d.%d", h.ipSeq/250, h.ipSeq%250+2)
		} else {
			vm.ip = "" // the guest reports its own, once its agent runs
		}
		h.startBoot(hh, vm)
	}
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

func (h *HyperV) stopVM(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if vm.state == hvOff {
		return map[string]any{"VM": h.vmJSON(vm)}, nil
	}
	switch in.Mode {
	case "TurnOff":
		h.powerOff(vm)
	case "Shutdown":
		if vm.state != hvRunning {
			return nil, refuse("Busy", "VM %s has no running shutdown integration service", in.ID)
		}
		if b := h.boots[vm.id]; b != nil && b.boot == vm.boot {
			// The guest shuts down; its boot hook ends and the VM turns off (guestPowerOff).
			vm.state = hvStopping
			if b.shutdown != nil {
				b.shutdown()
			} else {
				b.cancel()
			}
		} else {
			h.powerOff(vm)
		}
	default:
		return nil, refuse("Invalid", "unknown stop mode '%s'", in.Mode)
	}
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

func (h *HyperV) removeVM(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if vm.state != hvOff {
		return nil, refuse("Busy", "VM %s is not off (state %d); stop it before deleting it", in.ID, vm.state)
	}
	if err := h.mergeBeforeRemove(vm); err != nil {
		return nil, err
	}
	var files []string
	for _, d := range vm.disks {
		if f := hh.files[key(d)]; f != nil && (f.parent != "" || isDiskOf(vm, f.path)) {
			files = append(files, f.path)
		}
	}
	// Disks a call made and did not attach, unless another VM uses them: in the VHD folder and the
	// folders of the caller's storages.
	var folders []string
	if in.VHDDirectory != "" {
		folders = append(folders, in.VHDDirectory)
	}
	folders = append(folders, hh.storageFolders(in)...)
	var loose []string
	for _, folder := range folders {
		dir := key(strings.TrimRight(folder, `\`) + `\`)
		for _, f := range hh.files {
			if strings.HasPrefix(key(f.path), dir) && !strings.Contains(f.path[len(dir):], `\`) && isDiskOf(vm, f.path) &&
				!containsFold(files, f.path) && !containsFold(loose, f.path) && !hh.diskInUse(f.path, vm.id) {
				loose = append(loose, f.path)
			}
		}
	}
	sort.Strings(loose)
	files = append(files, loose...)
	seedDir := key(strings.TrimRight(in.SeedDirectory, `\`) + `\`)
	for _, d := range vm.dvds {
		if d != "" && in.SeedDirectory != "" && strings.HasPrefix(key(d), seedDir) {
			files = append(files, d)
		}
	}
	for _, f := range []string{in.SeedPath, in.SeedPath + ".gz"} {
		if in.SeedPath != "" && hh.files[key(f)] != nil && !containsFold(files, f) {
			files = append(files, f)
		}
	}
	delete(hh.vms, vm.id)
	if h.guests != nil {
		h.guests.Forget(guestID(vm))
	}
	for _, f := range files {
		delete(hh.files, key(f))
	}
	return map[string]any{"Removed": h.strings(files)}, nil
}

func (h *HyperV) dismountSeed(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	for i, d := range vm.dvds {
		if d != "" && key(d) == key(in.SeedPath) {
			vm.dvds[i] = ""
		}
	}
	removed := hh.files[key(in.SeedPath)] != nil || hh.files[key(in.SeedPath+".gz")] != nil
	delete(hh.files, key(in.SeedPath))
	delete(hh.files, key(in.SeedPath+".gz"))
	return map[string]any{"Removed": removed}, nil
}

// powerOff pulls a VM's power and ends its guest. Called with h.mu held.
func (h *HyperV) powerOff(vm *hvVM) {
	vm.state, vm.ip = hvOff, ""
	if b := h.boots[vm.id]; b != nil {
		b.cancel()
		delete(h.boots, vm.id)
	}
}

func (hh *hvHost) vmByID(id string) (*hvVM, *hvError) {
	vm := hh.vms[strings.ToLower(id)]
	if vm == nil {
		return nil, refuse("NotFound", "VM %s does not exist on %s", id, strings.ToUpper(hh.name))
	}
	return vm, nil
}

// ownedVM is Get-HFOwnedVM: the VM, if its Notes carry the expected ownership.
func (hh *hvHost) ownedVM(in hvInput) (*hvVM, *hvError) {
	vm, err := hh.vmByID(in.ID)
	if err != nil {
		return nil, err
	}
	if !owned(vm, in) {
		return nil, refuse("NotOwned", "VM %s (%s) does not carry this HyperFleet installation's ownership block in its Notes; it is left alone", in.ID, vm.name)
	}
	return vm, nil
}

// owned is Test-HFOwned.
func owned(vm *hvVM, in hvInput) bool {
	if notesBlock(vm.notes, "```hyperfleet-template") != nil {
		return false
	}
	kv := notesBlock(vm.notes, "```hyperfleet")
	e := in.Expect
	return kv["managed-by"] == "hyperfleet" && e.Installation != "" && kv["installation"] == e.Installation &&
		e.OwnerTag != "" && kv["owner-tag"] == e.OwnerTag && (e.ClaimID == "" || kv["claim-id"] == e.ClaimID)
}

// notesBlock is Get-HFBlock: the last fenced block opened by start, as key/value pairs.
func notesBlock(notes, start string) map[string]string {
	notes = strings.ReplaceAll(notes, "\r\n", "\n")
	i := strings.LastIndex(notes, start+"\n")
	if i < 0 {
		return nil
	}
	body := notes[i+len(start)+1:]
	if end := strings.Index(body, "```"); end >= 0 {
		body = body[:end]
	}
	kv := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv
}

func sortedVMs(hh *hvHost) []*hvVM {
	out := make([]*hvVM, 0, len(hh.vms))
	for _, vm := range hh.vms {
		out = append(out, vm)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].name < out[j-1].name || out[j].name == out[j-1].name && out[j].id < out[j-1].id); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// expandSeed is Expand-HFSeed: the uploaded archive unpacked to the seed path, checked, removed.
func (hh *hvHost) expandSeed(in hvInput) *hvError {
	f := hh.files[key(in.SeedArchivePath)]
	if f == nil {
		return refuse("NotFound", "seed archive %s does not exist on %s", in.SeedArchivePath, strings.ToUpper(hh.name))
	}
	r, err := gzip.NewReader(bytes.NewReader(f.data))
	var data []byte
	if err == nil {
		data, err = io.ReadAll(r)
	}
	if err != nil {
		return refuse("Failed", "Exception calling \"CopyTo\" with \"1\" argument(s): \"The magic number in GZip header is not correct.\"")
	}
	delete(hh.files, key(in.SeedArchivePath))
	if sum := sha256Hex(data); sum != in.SeedSHA256 {
		return refuse("Invalid", "seed %s has SHA-256 %s, not %s", in.SeedPath, sum, in.SeedSHA256)
	}
	hh.writeFile(in.SeedPath, data)
	return nil
}
