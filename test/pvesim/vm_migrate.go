package pvesim

import (
	"regexp"
	"sort"
	"strings"
)

// localResourceRe matches config keys of host devices, which pin a VM to its node.
var localResourceRe = regexp.MustCompile(`^(hostpci|usb|serial|parallel)\d+$`)

// getMigratePrecondition is GET …/migrate: what would keep the VM from moving. Disks (CD-ROMs
// included) on storage only this node has are local_disks; host devices are local_resources;
// allowed_nodes are the other online nodes that have every storage the VM uses.
func (s *Simulator) getMigratePrecondition(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	localDisks := []map[string]any{}
	localResources := []string{}
	used := map[string]bool{}
	keys := make([]string, 0, len(vm.conf))
	for k := range vm.conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := vm.conf[k]
		if localResourceRe.MatchString(k) && !strings.HasPrefix(v, "socket") {
			localResources = append(localResources, k)
			continue
		}
		if !isDriveKey(k) {
			continue
		}
		d := parseDrive(v)
		if d.storage == "" {
			continue
		}
		used[d.storage] = true
		st := s.storage(d.storage)
		if st == nil || st.shared {
			continue
		}
		var size int64
		if vol := s.getVolumeOn(vm.node, d.volid()); vol != nil {
			size = vol.size
		}
		localDisks = append(localDisks, map[string]any{"volid": d.volid(), "size": size,
			"cdrom": boolInt(d.isCDROM()), "is_unused": boolInt(strings.HasPrefix(k, "unused"))})
	}
	allowed := []string{}
	notAllowed := map[string]any{}
	for _, n := range s.nodes {
		if n.name == vm.node || !n.online {
			continue
		}
		var missing []string
		for st := range used {
			if def := s.storage(st); def == nil || !def.onNode(n.name) {
				missing = append(missing, st)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			notAllowed[n.name] = map[string]any{"unavailable_storages": missing}
			continue
		}
		allowed = append(allowed, n.name)
	}
	return map[string]any{
		"running": boolInt(vm.status == "running"), "allowed_nodes": allowed, "not_allowed_nodes": notAllowed,
		"local_disks": localDisks, "local_resources": localResources, "mapped-resources": []string{},
		"mapped-resource-info": map[string]any{}, "has-dbus-vmstate": 1,
	}, nil
}
