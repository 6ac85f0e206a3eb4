package pvesim

import (
	"maps"
	"sort"
	"strings"
	"time"
)

// vmSnapshot is one entry of a VM's snapshot tree: the config (and, standing for the disks, the
// guest data) at the time, with the RAM state when vmstate was asked of a running VM.
type vmSnapshot struct {
	name        string
	description string
	snaptime    int64
	vmstate     bool
	parent      string
	conf        map[string]string
	guestData   string
	seq         int
}

func (vm *vmState) sortedSnapshots() []*vmSnapshot {
	out := make([]*vmSnapshot, 0, len(vm.snapshots))
	for _, sn := range vm.snapshots {
		out = append(out, sn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// snapshotFeature is has_feature('snapshot'): every disk's storage must take snapshots (thin
// LVM, ZFS, Ceph, or a qcow2 file), or PVE refuses the whole snapshot.
func (s *Simulator) snapshotFeature(vm *vmState) bool {
	for k, v := range vm.conf {
		d := parseDrive(v)
		if !isDriveKey(k) || strings.HasPrefix(k, "unused") || d.isCDROM() || d.storage == "" {
			continue
		}
		st := s.storage(d.storage)
		if st == nil {
			return false
		}
		switch st.typ {
		case "lvmthin", "zfspool", "rbd":
		default:
			if fileFormat(d.name) != "qcow2" {
				return false
			}
		}
	}
	return true
}

// getSnapshots is GET …/snapshot: the snapshots plus "current", the live state.
func (s *Simulator) getSnapshots(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, sn := range vm.sortedSnapshots() {
		e := map[string]any{"name": sn.name, "description": sn.description, "snaptime": sn.snaptime}
		if sn.parent != "" {
			e["parent"] = sn.parent
		}
		if sn.vmstate {
			e["vmstate"] = 1
		}
		out = append(out, e)
	}
	cur := map[string]any{"name": "current", "description": "You are here!", "digest": vm.digest(), "running": boolInt(vm.status == "running")}
	if vm.parent != "" {
		cur["parent"] = vm.parent
	}
	return append(out, cur), nil
}

// snapshotTask runs a snapshot operation as PVE's worker does: the checks run when the worker
// starts (and fail the task, not the request), the VM is locked with lock while it runs.
func (s *Simulator) snapshotTask(rq *request, typ, lock string, check func(vm *vmState) *apiError, run func(vm *vmState) error, endpoint string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	if _, err := s.vmOnNode(node, vmid); err != nil {
		return nil, err
	}
	vm := s.vms[vmid]
	var early *apiError
	if err := check(vm); err != nil {
		early = err
	} else {
		vm.conf["lock"] = lock
	}
	unlock := func() {
		if v, ok := s.vms[vmid]; ok && v.conf["lock"] == lock {
			delete(v.conf, "lock")
		}
	}
	t := s.startTask(node, typ, vmidStr(vmid), rq.auth, taskWork{
		run: func(*task) error {
			if early != nil {
				return early
			}
			defer unlock()
			v, ok := s.vms[vmid]
			if !ok {
				return errf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid)
			}
			return run(v)
		},
		fail: func() {
			if early == nil {
				unlock()
			}
		},
	}, endpoint)
	return t.upid, nil
}

// postSnapshot is POST …/snapshot (qmsnapshot).
func (s *Simulator) postSnapshot(rq *request) (any, *apiError) {
	name := rq.p.get("snapname")
	switch strings.ToLower(name) {
	case "current", "pending":
		return nil, errf("unable to use snapshot name '%s' (reserved name)", name)
	}
	withState := rq.p.flag("vmstate")
	return s.snapshotTask(rq, "qmsnapshot", "snapshot", func(vm *vmState) *apiError {
		if err := lockErr(vm); err != nil {
			return err
		}
		if _, ok := vm.snapshots[name]; ok {
			return errf("snapshot name '%s' already used", name)
		}
		if !s.snapshotFeature(vm) {
			return errf("snapshot feature is not available")
		}
		return nil
	}, func(vm *vmState) error {
		if vm.snapshots == nil {
			vm.snapshots = map[string]*vmSnapshot{}
		}
		conf := maps.Clone(vm.conf)
		delete(conf, "lock")
		s.snapSeq++
		vm.snapshots[name] = &vmSnapshot{name: name, description: rq.p.get("description"), snaptime: time.Now().Unix(),
			vmstate: withState && vm.status == "running", parent: vm.parent, conf: conf, guestData: vm.guestData, seq: s.snapSeq}
		vm.parent = name
		return nil
	}, "POST /nodes/{node}/qemu/{vmid}/snapshot")
}

// deleteSnapshot is DELETE …/snapshot/{snapname} (qmdelsnapshot). force removes it from the
// config even when the VM is locked.
func (s *Simulator) deleteSnapshot(rq *request) (any, *apiError) {
	name := rq.p.get("snapname")
	force := rq.p.flag("force")
	return s.snapshotTask(rq, "qmdelsnapshot", "snapshot-delete", func(vm *vmState) *apiError {
		if _, ok := vm.snapshots[name]; !ok {
			return errf("snapshot '%s' does not exist", name)
		}
		if !force {
			return lockErr(vm)
		}
		return nil
	}, func(vm *vmState) error {
		gone := vm.snapshots[name]
		delete(vm.snapshots, name)
		for _, sn := range vm.snapshots {
			if sn.parent == name {
				sn.parent = gone.parent
			}
		}
		if vm.parent == name {
			vm.parent = gone.parent
		}
		return nil
	}, "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}")
}

// postRollback is POST …/snapshot/{snapname}/rollback (qmrollback): a running VM is stopped,
// the config and disks return to the snapshot's; a snapshot with RAM state resumes running, and
// start=1 starts the VM otherwise.
func (s *Simulator) postRollback(rq *request) (any, *apiError) {
	name := rq.p.get("snapname")
	start := rq.p.flag("start")
	return s.snapshotTask(rq, "qmrollback", "rollback", func(vm *vmState) *apiError {
		if _, ok := vm.snapshots[name]; !ok {
			return errf("snapshot '%s' does not exist", name)
		}
		return lockErr(vm)
	}, func(vm *vmState) error {
		sn := vm.snapshots[name]
		if vm.status == "running" {
			s.stopVM(vm)
		}
		vm.conf = maps.Clone(sn.conf)
		vm.conf["lock"] = "rollback" // released by the task
		vm.pending = nil
		vm.guestData = sn.guestData
		vm.parent = name
		if sn.vmstate || start {
			s.markRunning(vm, true)
		}
		return nil
	}, "POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback")
}

// getSnapshotConfig is GET …/snapshot/{snapname}/config.
func (s *Simulator) getSnapshotConfig(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	sn, ok := vm.snapshots[rq.p.get("snapname")]
	if !ok {
		return nil, errf("snapshot '%s' does not exist", rq.p.get("snapname"))
	}
	out := map[string]any{"snaptime": sn.snaptime, "description": sn.description}
	for k, v := range sn.conf {
		out[k] = v
	}
	if sn.parent != "" {
		out["parent"] = sn.parent
	}
	return out, nil
}

// putSnapshotConfig is PUT …/snapshot/{snapname}/config: only the description changes.
func (s *Simulator) putSnapshotConfig(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	sn, ok := vm.snapshots[rq.p.get("snapname")]
	if !ok {
		return nil, errf("snapshot '%s' does not exist", rq.p.get("snapname"))
	}
	if d, ok := rq.p.str("description"); ok {
		sn.description = d
	}
	return nil, nil
}
