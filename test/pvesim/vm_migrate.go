package pvesim

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
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

// postMigrate is POST …/migrate (qmigrate). As qemu-server does, the request itself refuses the
// local node as target ("target is local node."), an unknown node, a locked VM and a running VM
// without online; the worker then refuses a running VM with host devices, local disks of a
// running VM without with-local-disks and storage the target lacks, each failing the task with
// PVE's text. The VM is locked "migrate" while the task runs; cancelling the task (DELETE
// …/tasks/{upid}) leaves it where it was. A stopped VM moves offline, its local disks with it.
func (s *Simulator) postMigrate(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid, target := rq.p.get("node"), rq.vmid(), rq.p.get("target")
	if target == node {
		return nil, paramErr(map[string]string{"target": "target is local node."})
	}
	if s.node(target) == nil {
		return nil, errf("no such cluster node '%s'", target)
	}
	vm, err := s.vmOnNode(node, vmid)
	if err != nil {
		return nil, err
	}
	if err := lockErr(vm); err != nil {
		return nil, err
	}
	online := rq.p.flag("online")
	withLocalDisks := rq.p.flag("with-local-disks")
	var warnings []string
	if vm.status == "running" {
		if !online {
			return nil, errf("can't migrate running VM without --online")
		}
	} else if online {
		warnings = append(warnings, "VM isn't running. Doing offline migration instead.")
		online = false
	}
	vm.conf["lock"] = "migrate"
	unlock := func() {
		if v, ok := s.vms[vmid]; ok && v.conf["lock"] == "migrate" {
			delete(v.conf, "lock")
		}
	}
	t := s.startTask(node, "qmigrate", vmidStr(vmid), rq.auth, taskWork{
		run: func(t *task) error {
			defer unlock()
			v, ok := s.vms[vmid]
			if !ok || v.node != node {
				return errf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid)
			}
			t.log = append(t.log, warnings...)
			t.log = append(t.log, fmt.Sprintf("starting migration of VM %d to node '%s'", vmid, target))
			if tn := s.node(target); tn == nil || !tn.online {
				return fmt.Errorf("migration aborted: target node '%s' is not online", target)
			}
			running := v.status == "running"
			var localRes, localVols []string
			keys := make([]string, 0, len(v.conf))
			for k := range v.conf {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				val := v.conf[k]
				if localResourceRe.MatchString(k) && !strings.HasPrefix(val, "socket") {
					localRes = append(localRes, k)
					continue
				}
				if !isDriveKey(k) {
					continue
				}
				d := parseDrive(val)
				if d.storage == "" || d.isCDROM() {
					continue
				}
				st := s.storage(d.storage)
				if st == nil || !st.onNode(target) {
					return fmt.Errorf("storage '%s' is not available on node '%s'", d.storage, target)
				}
				if !st.shared {
					localVols = append(localVols, d.volid())
				}
			}
			if running && len(localRes) > 0 {
				return fmt.Errorf("can't migrate VM which uses local devices: %s", strings.Join(localRes, ", "))
			}
			if running && len(localVols) > 0 && !withLocalDisks {
				return fmt.Errorf("can't migrate local disk '%s': can't live migrate attached local disks without with-local-disks option", localVols[0])
			}
			for _, volid := range localVols {
				if vol := s.getVolumeOn(node, volid); vol != nil {
					s.dropVolume(node, volid)
					s.putVolume(target, vol)
				}
				t.log = append(t.log, fmt.Sprintf("copying local disk '%s' to node '%s'", volid, target))
			}
			if online {
				t.log = append(t.log, "starting online/live migration", "migration status: completed")
			}
			v.node = target
			t.log = append(t.log, fmt.Sprintf("migration finished successfully (duration %s)", time.Since(t.start).Round(time.Second)))
			return nil
		},
		fail: unlock,
	}, "POST /nodes/{node}/qemu/{vmid}/migrate")
	return t.upid, nil
}
