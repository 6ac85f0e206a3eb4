package pvesim

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
)

const configEndpoint = "POST /nodes/{node}/qemu/{vmid}/config"

// vmOnNode loads a VM's config like PVE::QemuConfig->load_config on node.
func (s *Simulator) vmOnNode(node string, vmid int) (*vmState, *apiError) {
	vm, ok := s.vms[vmid]
	if !ok || vm.node != node {
		return nil, errf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid)
	}
	return vm, nil
}

// vmRunningCheck is check_running's existence assertion.
func (s *Simulator) vmRunningCheck(node string, vmid int) (*vmState, *apiError) {
	vm, ok := s.vms[vmid]
	if !ok || vm.node != node {
		return nil, errf("unable to find configuration file for VM %d on node '%s'", vmid, node)
	}
	return vm, nil
}

func lockErr(vm *vmState) *apiError {
	if l := vm.conf["lock"]; l != "" {
		return errf("VM is locked (%s)", l)
	}
	return nil
}

func (rq *request) vmid() int { n, _ := strconv.Atoi(rq.p.get("vmid")); return n }

// configTypes maps config keys ("cores", "net[n]") to their schema type so
// GET config answers numbers for integer/boolean keys and strings otherwise.
func (s *Simulator) configProps() map[string]*schema.Property {
	for _, ep := range s.schema.Endpoints {
		if ep.Method+" "+ep.Path == configEndpoint {
			return ep.Parameters.Properties
		}
	}
	return nil
}

func (s *Simulator) configJSON(conf map[string]string) map[string]any {
	props := s.configProps()
	out := map[string]any{}
	for k, v := range conf {
		out[k] = v
		p := lookupProp(props, k)
		if p == nil {
			continue
		}
		switch p.Type {
		case "integer", "boolean":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n
			}
		case "number":
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				out[k] = f
			}
		}
	}
	return out
}

func (s *Simulator) getVMConfig(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	conf := map[string]string{}
	for k, v := range vm.conf {
		conf[k] = v
	}
	if !rq.p.flag("current") {
		for k, v := range vm.pending {
			if v == "" {
				delete(conf, k)
			} else {
				conf[k] = v
			}
		}
	}
	if conf["cipassword"] != "" {
		conf["cipassword"] = "**********"
	}
	out := s.configJSON(conf)
	out["digest"] = vm.digest()
	return out, nil
}

func (s *Simulator) getVMPending(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for k := range vm.conf {
		keys[k] = true
	}
	for k := range vm.pending {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	typed := s.configJSON(vm.conf)
	pend := s.configJSON(vm.pending)
	out := []map[string]any{}
	for _, k := range names {
		row := map[string]any{"key": k}
		if v, ok := typed[k]; ok {
			row["value"] = v
		}
		if v, ok := vm.pending[k]; ok {
			if v == "" {
				row["delete"] = 1
			} else {
				row["pending"] = pend[k]
			}
		}
		out = append(out, row)
	}
	return out, nil
}

func (s *Simulator) postVMConfig(rq *request) (any, *apiError) { return s.updateVM(rq, false) }

func (s *Simulator) putVMConfig(rq *request) (any, *apiError) { return s.updateVM(rq, true) }

// configMeta are the update parameters that are not config keys.
var configMeta = map[string]bool{
	"node": true, "vmid": true, "digest": true, "background_delay": true, "skip_cloud_init": true,
	"import-working-storage": true, "skiplock": true, "delete": true, "revert": true, "force": true,
}

// fastplug options apply at once even on a running VM (qemu-server's $fast_plug_option).
var fastplug = map[string]bool{
	"name": true, "description": true, "tags": true, "onboot": true, "protection": true, "startup": true,
	"hotplug": true, "shares": true, "vmstatestorage": true, "lock": true, "agent": true,
	"ciuser": true, "cipassword": true, "sshkeys": true, "nameserver": true, "searchdomain": true,
	"cicustom": true, "citype": true, "ciupgrade": true, "boot": true,
}

var hotplugKeyRe = regexp.MustCompile(`^(net|scsi|virtio|sata|ide|ipconfig|unused)\d+$`)

// updateVM is qemu-server's $update_vm_api: PUT applies synchronously, POST
// returns a qmconfig task that applies the change.
func (s *Simulator) updateVM(rq *request, sync bool) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	if rq.p.flag("skiplock") && !rq.auth.isRoot() {
		return nil, paramErr(map[string]string{"skiplock": "Only root may use this option."})
	}
	set := map[string]string{}
	for k, v := range rq.p {
		if !configMeta[k] {
			set[k] = v.s
		}
	}
	if v, ok := set["cdrom"]; ok {
		set["ide2"] = v
		delete(set, "cdrom")
	}
	deletes := splitList(rq.p.get("delete"))
	if len(set) == 0 && len(deletes) == 0 && rq.p.get("revert") == "" {
		return nil, errf("no options specified")
	}
	props := s.configProps()
	for _, d := range deletes {
		if lookupProp(props, d) == nil {
			return nil, paramErr(map[string]string{"delete": fmt.Sprintf("unknown option '%s'", d)})
		}
		if _, both := set[d]; both {
			return nil, paramErr(map[string]string{"delete": fmt.Sprintf("you can't use '-%s' and -delete %s' at the same time", d, d)})
		}
	}
	check := func() (*vmState, *apiError) {
		vm, err := s.vmOnNode(node, vmid)
		if err != nil {
			return nil, err
		}
		if d := rq.p.get("digest"); d != "" && d != vm.digest() {
			return nil, errf("checksum mismatch (file change by other user?)")
		}
		if !rq.p.flag("skiplock") {
			if err := lockErr(vm); err != nil {
				return nil, err
			}
		}
		return vm, nil
	}
	if _, err := check(); err != nil {
		return nil, err
	}
	apply := func() *apiError {
		vm, err := check()
		if err != nil {
			return err
		}
		return s.applyConfig(vm, set, deletes)
	}
	if sync {
		if err := apply(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	t := s.startTask(node, "qmconfig", vmidStr(vmid), rq.auth, taskWork{run: func(*task) error {
		if err := apply(); err != nil {
			return err
		}
		return nil
	}}, configEndpoint)
	return t.upid, nil
}

// applyConfig writes set/deletes into the VM (pending for a running VM
// where PVE cannot hotplug). Called with s.mu held.
func (s *Simulator) applyConfig(vm *vmState, set map[string]string, deletes []string) *apiError {
	next := map[string]string{}
	for k, v := range set {
		switch {
		case k == "tags":
			v = uniqueTags(v)
		case strings.HasPrefix(k, "net") && hotplugKeyRe.MatchString(k):
			v = s.normalizeNet(v)
		case isDriveKey(k):
			nv, err := s.allocateDrive(vm, k, v)
			if err != nil {
				return err
			}
			v = nv
		}
		next[k] = v
	}
	if boot, ok := next["boot"]; ok {
		if order, ok := strings.CutPrefix(boot, "order="); ok {
			for _, dev := range strings.Split(order, ";") {
				_, exists := vm.conf[dev]
				_, adding := next[dev]
				if dev != "" && !exists && !adding {
					return errf("invalid bootorder: device '%s' does not exist'", dev)
				}
			}
		}
	}
	running := vm.status == "running"
	for k, v := range next {
		if running && !fastplug[k] && !hotplugKeyRe.MatchString(k) {
			if vm.pending == nil {
				vm.pending = map[string]string{}
			}
			vm.pending[k] = v
			continue
		}
		if old, ok := vm.conf[k]; ok && isDriveKey(k) && old != v {
			s.detachDrive(vm, old)
		}
		vm.conf[k] = v
	}
	for _, k := range deletes {
		old, ok := vm.conf[k]
		if !ok {
			continue
		}
		if running && !fastplug[k] && !hotplugKeyRe.MatchString(k) {
			if vm.pending == nil {
				vm.pending = map[string]string{}
			}
			vm.pending[k] = ""
			continue
		}
		delete(vm.conf, k)
		if isDriveKey(k) {
			if strings.HasPrefix(k, "unused") {
				s.dropVolume(vm.node, parseDrive(old).volid())
			} else {
				s.detachDrive(vm, old)
			}
		}
	}
	return nil
}

// detachDrive turns a replaced or deleted disk into an unusedN entry, as PVE does.
func (s *Simulator) detachDrive(vm *vmState, val string) {
	d := parseDrive(val)
	if d.isCDROM() || d.storage == "" {
		return
	}
	for i := 0; i < 256; i++ {
		k := fmt.Sprintf("unused%d", i)
		if _, used := vm.conf[k]; !used {
			vm.conf[k] = d.volid()
			return
		}
	}
}

var allocSyntaxRe = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]):(\d+(?:\.\d+)?)$`)

// allocateDrive handles "STORAGE:SIZE_IN_GiB" (a new disk) and checks that
// referenced volumes exist. Called with s.mu held.
func (s *Simulator) allocateDrive(vm *vmState, key, val string) (string, *apiError) {
	d := parseDrive(val)
	if d.isCDROM() {
		return val, nil
	}
	if m := allocSyntaxRe.FindStringSubmatch(d.file); m != nil {
		st := s.storage(m[1])
		if st == nil || !st.onNode(vm.node) {
			return "", errf("storage '%s' does not exist", m[1])
		}
		if !st.hasContent("images") {
			return "", errf("storage '%s' does not support content-type 'images'", m[1])
		}
		gib, _ := strconv.ParseFloat(m[2], 64)
		size := int64(gib * (1 << 30))
		name := s.freeDiskName(vm.node, m[1], vm.vmid)
		s.putVolume(vm.node, &volume{storage: m[1], volid: m[1] + ":" + name, content: "images", format: "raw", size: size, vmid: vm.vmid})
		d.file = m[1] + ":" + name
		d.set("size", formatSize(size))
		return d.String(), nil
	}
	if d.storage != "" && s.getVolumeOn(vm.node, d.volid()) == nil {
		return "", errf("volume '%s' does not exist", d.volid())
	}
	return val, nil
}

func (s *Simulator) freeDiskName(node, storeID string, vmid int) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("vm-%d-disk-%d", vmid, i)
		taken := false
		for _, v := range s.volumes {
			if v.storage == storeID && (strings.HasSuffix(v.volid, ":"+name) || strings.HasSuffix(v.volid, "/"+name)) {
				taken = true
				break
			}
		}
		if !taken {
			return name
		}
	}
}

// normalizeNet fills in a MAC address and prints "model=MAC,key=value...".
func (s *Simulator) normalizeNet(v string) string {
	props := s.configProps()
	p := lookupProp(props, "net0")
	if p == nil || p.FormatProps == nil {
		return v
	}
	res, msg := parsePropertyString(p.FormatProps, v)
	if msg != "" {
		return v
	}
	if res["macaddr"] == "" {
		res["macaddr"] = s.randomMAC()
	}
	model := res["model"]
	out := []string{model + "=" + strings.ToUpper(res["macaddr"])}
	keys := []string{}
	for k := range res {
		if k != "model" && k != "macaddr" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+res[k])
	}
	return strings.Join(out, ",")
}
