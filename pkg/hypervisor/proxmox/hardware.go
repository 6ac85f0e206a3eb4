package proxmox

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
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

var macAddrRe = regexp.MustCompile(`^[0-9A-Fa-f][02468aceACE](:[0-9A-Fa-f]{2}){5}$`)

// nicParams renders every NIC as netN ("virtio=02:..,bridge=vmbr0,firewall=1,mtu=9000,tag=42")
// and lists the template's NICs beyond them for deletion, so the VM has exactly the claim's NICs.
func nicParams(cfg map[string]string, nics []hypervisor.NIC) (map[string]any, []string, error) {
	out := map[string]any{}
	for i, n := range nics {
		if !macAddrRe.MatchString(n.MAC) {
			return nil, nil, fmt.Errorf("NIC %d: MAC %q is not a unicast MAC address", i, n.MAC)
		}
		model := n.Model
		if model == "" {
			model = "virtio"
		}
		bridge := n.Bridge
		if bridge == "" {
			bridge = DefaultBridge
		}
		if strings.ContainsAny(model+bridge, ",=; ") {
			return nil, nil, fmt.Errorf("NIC %d: model %q or bridge %q holds a separator", i, model, bridge)
		}
		if n.VLAN < 0 || n.VLAN > 4094 || n.MTU < 0 || n.MTU > 65520 {
			return nil, nil, fmt.Errorf("NIC %d: VLAN %d or MTU %d out of range", i, n.VLAN, n.MTU)
		}
		s := fmt.Sprintf("%s=%s,bridge=%s", model, strings.ToUpper(n.MAC), bridge)
		if pol := n.Policy; pol != nil && len(pol.Rules) > 0 && pol.SecurityGroup == "" {
			return nil, nil, fmt.Errorf("NIC %d: Proxmox binds a NIC to its network's security group; rules of the NIC's own are not supported", i)
		}
		if n.Firewall || (n.Policy != nil && n.Policy.SecurityGroup != "") {
			// The group binding on the VM's firewall filters only NICs with the firewall on.
			s += ",firewall=1"
		}
		if n.Policy != nil && n.Policy.RateMbps < 0 {
			return nil, nil, fmt.Errorf("NIC %d: negative rate %d Mbps", i, n.Policy.RateMbps)
		}
		if n.MTU > 0 {
			s += fmt.Sprintf(",mtu=%d", n.MTU)
		}
		if n.VLAN > 0 {
			s += fmt.Sprintf(",tag=%d", n.VLAN)
		}
		if n.Policy != nil && n.Policy.RateMbps > 0 {
			s += ",rate=" + rateMBps(n.Policy.RateMbps)
		}
		out[fmt.Sprintf("net%d", i)] = s
	}
	var remove []string
	for k := range cfg {
		if n, ok := strings.CutPrefix(k, "net"); ok && netIndexRe.MatchString(n) {
			if _, kept := out[k]; !kept {
				remove = append(remove, k)
			}
		}
	}
	sort.Strings(remove)
	return out, remove, nil
}

var netIndexRe = regexp.MustCompile(`^\d+$`)

// rateMBps renders a cap in megabits per second as PVE's NIC rate, megabytes per second as a
// decimal number: 100 Mbps is "12.5".
func rateMBps(mbps int) string {
	return strconv.FormatFloat(float64(mbps)/8, 'f', -1, 64)
}

var mappingRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]+$`)

// pciParams renders each device as hostpciN: "mapping=gpu,pcie=1,x-vga=1". A mapping (never a raw
// host address, which only root may set) lets PVE pick the device on whatever node the VM is on,
// and check the token's Mapping.Use on it.
func pciParams(devs []hypervisor.PCIDevice) (map[string]any, error) {
	if len(devs) > 16 {
		return nil, fmt.Errorf("%d PCI devices: PVE takes at most 16", len(devs))
	}
	out := map[string]any{}
	for i, d := range devs {
		if !mappingRe.MatchString(d.Mapping) {
			return nil, fmt.Errorf("PCI mapping %q is not a PVE configuration ID", d.Mapping)
		}
		s := "mapping=" + d.Mapping
		if d.PCIe {
			s += ",pcie=1"
		}
		if d.PrimaryGPU {
			s += ",x-vga=1"
		}
		out[fmt.Sprintf("hostpci%d", i)] = s
	}
	return out, nil
}
