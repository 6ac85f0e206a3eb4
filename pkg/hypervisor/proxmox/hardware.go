package proxmox

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// busSlots is how many drives of each bus PVE allows (scsi0..30, virtio0..15, sata0..5).
var busSlots = map[string]int{"scsi": 31, "virtio": 16, "sata": 6}

var (
	diskNameRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	storageNameRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9\-_.]*$`)
)

// extraDiskParams renders the config keys that create the extra disks the VM does not carry yet:
// "scsi1": "local-lvm:20,serial=data" allocates a new 20 GiB volume (PVE's STORAGE:SIZE syntax).
// The serial is the disk's name: a disk already on the VM with that serial, on any bus, is left
// alone, so a retried Configure neither adds a second disk nor replaces (and orphans) the first.
// New disks take the lowest free slot of their bus; a disk's storage defaults to the boot disk's.
func extraDiskParams(cfg map[string]string, disks []hypervisor.ExtraDisk) (map[string]any, error) {
	have := map[string]bool{}
	for k, v := range cfg {
		if !isDiskKey(k) {
			continue
		}
		if serial := driveOption(v, "serial"); serial != "" {
			have[serial] = true
		}
	}
	taken := func(key string) bool { _, ok := cfg[key]; return ok }
	out := map[string]any{}
	for _, d := range disks {
		if !diskNameRe.MatchString(d.Name) || len(d.Name) > 60 {
			return nil, fmt.Errorf("disk name %q is not a lowercase DNS label", d.Name)
		}
		if d.SizeGiB <= 0 {
			return nil, fmt.Errorf("disk %s needs a positive size", d.Name)
		}
		if have[d.Name] {
			continue
		}
		have[d.Name] = true
		bus := d.Bus
		if bus == "" {
			bus = "scsi"
		}
		slots, ok := busSlots[bus]
		if !ok {
			return nil, fmt.Errorf("disk %s: bus %q is not scsi, virtio or sata", d.Name, bus)
		}
		storage := d.Storage
		if storage == "" {
			storage = volumeStorage(cfg[bootDisk(cfg)])
		}
		if !storageNameRe.MatchString(storage) {
			return nil, fmt.Errorf("disk %s: no storage given and the VM's boot disk names none", d.Name)
		}
		key := ""
		for i := 0; i < slots; i++ {
			k := fmt.Sprintf("%s%d", bus, i)
			if _, used := out[k]; !used && !taken(k) {
				key = k
				break
			}
		}
		if key == "" {
			return nil, fmt.Errorf("disk %s: every %s slot of the VM is taken", d.Name, bus)
		}
		out[key] = fmt.Sprintf("%s:%d,serial=%s", storage, d.SizeGiB, d.Name)
	}
	return out, nil
}

var diskKeyRe = regexp.MustCompile(`^(scsi|virtio|sata|ide)\d+$`)

func isDiskKey(k string) bool { return diskKeyRe.MatchString(k) }

// driveOption reads one key=value option of a drive string.
func driveOption(drive, key string) string {
	for _, part := range strings.Split(drive, ",") {
		if v, ok := strings.CutPrefix(part, key+"="); ok {
			return v
		}
	}
	return ""
}

// volumeStorage is the storage ID of a drive string's volume ("local-lvm:vm-100-disk-0,size=8G").
func volumeStorage(drive string) string {
	file, _, _ := strings.Cut(drive, ",")
	if strings.Contains(file, "=") {
		return "" // "file=..." or a cdrom's "media=..." first: not a plain volume
	}
	storage, _, ok := strings.Cut(file, ":")
	if !ok {
		return ""
	}
	return storage
}
