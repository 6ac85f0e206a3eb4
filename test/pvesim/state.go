package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type nodeState struct {
	name     string
	id       int
	cpus     int
	maxmem   int64
	baseUsed int64
	online   bool
}

type storageDef struct {
	name    string
	typ     string
	content []string
	shared  bool
	total   int64
	nodes   map[string]bool // nil: every node
	// conf holds the type-specific options a POST /storage gave (path, pool, server, ...).
	conf map[string]string
}

func (d *storageDef) onNode(node string) bool { return d.nodes == nil || d.nodes[node] }

func (d *storageDef) hasContent(c string) bool {
	for _, x := range d.content {
		if x == c {
			return true
		}
	}
	return false
}

// volume is one file or disk on a storage.
type volume struct {
	storage string
	volid   string // "local-lvm:vm-200-disk-0", "local:iso/user-data-200.iso"
	content string // images, iso, snippets, vztmpl, ...
	format  string
	size    int64
	vmid    int
	parent  string // linked clones: the base volume name
	ctime   int64
	data    []byte
}

type poolState struct {
	id      string
	comment string
	members map[int]bool
	// storage holds the pool's storage members by storage ID.
	storage map[string]bool
}

// vmState is a VM's config file plus its runtime state.
type vmState struct {
	vmid      int
	node      string
	conf      map[string]string // PVE config keys; "lock", "template", "tags", ...
	pending   map[string]string
	status    string // running, stopped
	startedAt time.Time
	pid       int
	ip        string
	// snapshots by name and parent, the snapshot the current state derives from.
	snapshots map[string]*vmSnapshot
	parent    string
	// guestData stands for the guest's disk contents (WriteGuestData).
	guestData string
	// ignoreShutdown: the guest does not react to ACPI shutdown (IgnoreShutdown).
	ignoreShutdown bool
	// guestNICs are the interfaces the guest configured from its network-config, if it had one.
	guestNICs []guestNIC
}

func (s *Simulator) node(name string) *nodeState {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (s *Simulator) storage(name string) *storageDef {
	for _, st := range s.storages {
		if st.name == name {
			return st
		}
	}
	return nil
}

func (s *Simulator) volumeKey(node, volid string) string {
	storeID, _, _ := strings.Cut(volid, ":")
	if st := s.storage(storeID); st != nil && st.shared {
		node = ""
	}
	return node + "/" + volid
}

func (s *Simulator) putVolume(node string, v *volume) {
	if v.ctime == 0 {
		v.ctime = time.Now().Unix()
	}
	s.volumes[s.volumeKey(node, v.volid)] = v
}

func (s *Simulator) getVolumeOn(node, volid string) *volume {
	return s.volumes[s.volumeKey(node, volid)]
}

func (s *Simulator) dropVolume(node, volid string) { delete(s.volumes, s.volumeKey(node, volid)) }

// usedMem is a node's used memory: its base load plus its running VMs.
func (s *Simulator) usedMem(n *nodeState) int64 {
	used := n.baseUsed
	for _, vm := range s.vms {
		if vm.node == n.name && vm.status == "running" {
			used += vm.maxmem()
		}
	}
	return min(used, n.maxmem)
}

// --- config helpers --------------------------------------------------------

var driveKeyRe = regexp.MustCompile(`^(ide|sata|scsi|virtio|efidisk|tpmstate|unused)\d+$`)

func isDriveKey(k string) bool { return driveKeyRe.MatchString(k) }

// drive is a parsed drive property string ("local-lvm:vm-200-disk-0,size=32G").
type drive struct {
	file    string
	storage string
	name    string
	opts    map[string]string
	order   []string
}

func parseDrive(v string) drive {
	d := drive{opts: map[string]string{}}
	for i, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(part, "=")
		if i == 0 && (!ok || k == "file") {
			if !ok {
				d.file = part
			} else {
				d.file = val
			}
			continue
		}
		d.opts[k] = val
		d.order = append(d.order, k)
	}
	if st, name, ok := strings.Cut(d.file, ":"); ok {
		d.storage, d.name = st, name
	}
	return d
}

func (d drive) volid() string { return d.file }

func (d drive) isCDROM() bool {
	return d.opts["media"] == "cdrom" || d.file == "none" || d.file == "cdrom"
}

func (d drive) String() string {
	parts := []string{d.file}
	for _, k := range d.order {
		parts = append(parts, k+"="+d.opts[k])
	}
	return strings.Join(parts, ",")
}

func (d *drive) set(k, v string) {
	if _, ok := d.opts[k]; !ok {
		d.order = append(d.order, k)
	}
	d.opts[k] = v
}

// parseSize parses PVE sizes like "32G", "512M", "1024" (bytes).
func parseSize(v string) int64 {
	m := regexp.MustCompile(`^(\d+(?:\.\d+)?)([KMGT])?$`).FindStringSubmatch(v)
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	switch m[2] {
	case "K":
		f *= 1 << 10
	case "M":
		f *= 1 << 20
	case "G":
		f *= 1 << 30
	case "T":
		f *= 1 << 40
	}
	return int64(f)
}

// formatSize is PVE::JSONSchema::format_size.
func formatSize(n int64) string {
	units := []string{"", "K", "M", "G", "T"}
	i := 0
	for i < len(units)-1 && n%1024 == 0 && n >= 1024 {
		n /= 1024
		i++
	}
	return strconv.FormatInt(n, 10) + units[i]
}

// uniqueTags is PVE::GuestHelpers::get_unique_tags with the default tag
// style: lowercased, de-duplicated, sorted, joined with ';'.
func uniqueTags(v string) string {
	seen := map[string]bool{}
	var out []string
	for _, t := range splitList(v) {
		t = strings.ToLower(t)
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ";")
}

func fileFormat(name string) string {
	if i := strings.LastIndex(name, "."); i >= 0 {
		return name[i+1:]
	}
	return "raw"
}

func (vm *vmState) isTemplate() bool { return vm.conf["template"] == "1" }

// maxmem is the VM's memory in bytes (the memory property's current value).
func (vm *vmState) maxmem() int64 {
	return mib(vm.memoryMiB())
}

func (vm *vmState) memoryMiB() int {
	v := vm.conf["memory"]
	if v == "" {
		return 512
	}
	if cur, ok := strings.CutPrefix(v, "current="); ok {
		v = cur
	}
	v, _, _ = strings.Cut(v, ",")
	n, err := strconv.Atoi(v)
	if err != nil {
		return 512
	}
	return n
}

func (vm *vmState) cpus() int {
	cores, sockets := atoiOr(vm.conf["cores"], 1), atoiOr(vm.conf["sockets"], 1)
	if v := atoiOr(vm.conf["vcpus"], 0); v > 0 {
		return v
	}
	return cores * sockets
}

func atoiOr(v string, def int) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}

// digest is the SHA1 of the rendered config file, as PVE reports it.
func (vm *vmState) digest() string {
	keys := make([]string, 0, len(vm.conf))
	for k := range vm.conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha1.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s: %s\n", k, vm.conf[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// bootDisk is the size in bytes of the first disk in the boot order (or scsi0).
func (vm *vmState) bootDiskSize() int64 {
	candidates := []string{}
	if order, ok := strings.CutPrefix(vm.conf["boot"], "order="); ok {
		candidates = append(candidates, strings.Split(order, ";")...)
	}
	candidates = append(candidates, "scsi0", "virtio0", "sata0", "ide0")
	for _, k := range candidates {
		if v, ok := vm.conf[k]; ok && isDriveKey(k) {
			d := parseDrive(v)
			if !d.isCDROM() {
				return parseSize(d.opts["size"])
			}
		}
	}
	return 0
}

// markRunning flips a VM to running with a fresh PID and (first time) an IP.
func (s *Simulator) markRunning(vm *vmState, _ bool) {
	vm.status = "running"
	vm.startedAt = time.Now()
	s.pidSeq++
	vm.pid = s.pidSeq
	if vm.ip == "" {
		s.ipSeq++
		vm.ip = fmt.Sprintf("10.77.%d.%d", s.ipSeq/250, s.ipSeq%250+2)
	}
}

func (s *Simulator) markStopped(vm *vmState) {
	vm.status = "stopped"
	vm.pid = 0
	vm.startedAt = time.Time{}
	s.applyPending(vm)
}

// applyPending applies changes queued while the VM ran (PVE applies them at stop).
func (s *Simulator) applyPending(vm *vmState) {
	for k, v := range vm.pending {
		if v == "" {
			delete(vm.conf, k)
		} else {
			vm.conf[k] = v
		}
	}
	vm.pending = nil
}

func (s *Simulator) randomMAC() string {
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", s.rng.Intn(256), s.rng.Intn(256), s.rng.Intn(256))
}

func mustRe(p string) *regexp.Regexp { return regexp.MustCompile(p) }
