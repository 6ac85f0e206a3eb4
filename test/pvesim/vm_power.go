package pvesim

import (
	"sort"
	"strings"
	"time"
)

// vmStatus is qemu-server's vmstatus() entry for one VM.
func (s *Simulator) vmStatus(vm *vmState, full bool) map[string]any {
	name := vm.conf["name"]
	if name == "" {
		name = "VM " + vmidStr(vm.vmid)
	}
	node := s.node(vm.node)
	cpus := vm.cpus()
	if node != nil && cpus > node.cpus {
		cpus = node.cpus
	}
	d := map[string]any{
		"vmid": vm.vmid, "status": vm.status, "name": name, "cpus": cpus,
		"maxmem": vm.maxmem(), "mem": 0, "maxdisk": vm.bootDiskSize(), "disk": 0,
		"uptime": 0, "cpu": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "memhost": 0,
	}
	if vm.status == "running" {
		d["pid"] = vm.pid
		d["uptime"] = int64(time.Since(vm.startedAt).Seconds())
		d["mem"] = vm.maxmem() / 3
		d["memhost"] = vm.maxmem() / 3
		d["cpu"] = 0.02
	}
	if vm.isTemplate() {
		d["template"] = 1
	}
	if l := vm.conf["lock"]; l != "" {
		d["lock"] = l
	}
	if t, ok := vm.conf["tags"]; ok {
		d["tags"] = t
	}
	if _, ok := vm.conf["serial0"]; ok {
		d["serial"] = 1
	}
	if full {
		d["qmpstatus"] = vm.status
		if vm.status == "running" {
			d["running-machine"] = "pc-i440fx-10.0+pve0"
			d["running-qemu"] = "10.0.2"
		}
	}
	return d
}

func (s *Simulator) getVMList(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	out := []map[string]any{}
	for _, vm := range s.sortedVMs() {
		if vm.node == node && rq.auth.has("VM.Audit") {
			out = append(out, s.vmStatus(vm, rq.p.flag("full")))
		}
	}
	return out, nil
}

// getContainerList is GET /nodes/{node}/lxc. The simulated cluster runs no containers, so the
// list is empty; peers that list containers to find used VMIDs (as Cluster API's other Proxmox
// provider does) get PVE's answer, and a bad node or parameter is refused like for qemu.
func (s *Simulator) getContainerList(*request) (any, *apiError) {
	return []map[string]any{}, nil
}

func (s *Simulator) sortedVMs() []*vmState {
	out := make([]*vmState, 0, len(s.vms))
	for _, vm := range s.vms {
		out = append(out, vm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].vmid < out[j].vmid })
	return out
}

func (s *Simulator) getVMStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	d := s.vmStatus(vm, true)
	d["ha"] = map[string]any{"managed": 0}
	if agentEnabled(vm) {
		d["agent"] = 1
	}
	return d, nil
}

// agentEnabled reads the agent property's enabled flag (its default key).
func agentEnabled(vm *vmState) bool {
	v, ok := vm.conf["agent"]
	if !ok {
		return false
	}
	for _, part := range strings.Split(v, ",") {
		k, val, hasEq := strings.Cut(part, "=")
		if !hasEq {
			return parseBoolean(k) == "1"
		}
		if k == "enabled" {
			return parseBoolean(val) == "1"
		}
	}
	return false
}

func (s *Simulator) postVMStart(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	if rq.p.flag("skiplock") && !rq.auth.isRoot() {
		return nil, paramErr(map[string]string{"skiplock": "Only root may use this option."})
	}
	t := s.startTask(node, "qmstart", vmidStr(vmid), rq.auth, taskWork{run: func(*task) error {
		vm, err := s.vmOnNode(node, vmid)
		if err != nil {
			return err
		}
		if vm.isTemplate() {
			return errf("you can't start a vm if it's a template")
		}
		if !rq.p.flag("skiplock") {
			if err := lockErr(vm); err != nil {
				return err
			}
		}
		if vm.status == "running" {
			return errf("VM %d already running", vmid)
		}
		for k, v := range vm.conf {
			if d := parseDrive(v); isDriveKey(k) && !strings.HasPrefix(k, "unused") && d.storage != "" && s.getVolumeOn(node, d.volid()) == nil {
				return errf("volume '%s' does not exist", d.volid())
			}
		}
		if err := s.checkPCIMappings(vm); err != nil {
			return err
		}
		if err := s.checkBridges(vm); err != nil {
			return err
		}
		s.markRunning(vm, true)
		s.configureGuestNetwork(vm)
		s.startBoot(vm)
		return nil
	}}, "POST /nodes/{node}/qemu/{vmid}/status/start")
	return t.upid, nil
}

// stopTask is shared by stop and shutdown: vm_stop's _do_vm_stop.
func (s *Simulator) stopTask(rq *request, typ, endpoint string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	for _, p := range []string{"skiplock", "keepActive", "migratedfrom"} {
		if _, ok := rq.p[p]; ok && rq.p.get(p) != "0" && !rq.auth.isRoot() {
			return nil, paramErr(map[string]string{p: "Only root may use this option."})
		}
	}
	work := taskWork{run: func(*task) error {
		vm, err := s.vmRunningCheck(node, vmid)
		if err != nil {
			return err
		}
		if vm.status != "running" {
			return nil
		}
		if !rq.p.flag("skiplock") {
			if err := lockErr(vm); err != nil {
				return err
			}
		}
		// A real guest that is still running has not powered off within the timeout.
		if typ == "qmshutdown" && (vm.ignoreShutdown || s.qemu != nil) && !rq.p.flag("forceStop") {
			return errf("VM quit/powerdown failed - got timeout")
		}
		s.stopVM(vm)
		return nil
	}}
	if s.qemu != nil && typ == "qmshutdown" {
		timeout := time.Duration(atoiOr(rq.p.get("timeout"), 180)) * time.Second
		work.wait = func() { s.qemuShutdown(vmid, timeout) }
	}
	t := s.startTask(node, typ, vmidStr(vmid), rq.auth, work, endpoint)
	return t.upid, nil
}

// stopVM powers a VM off and ends its boot hook. Called with s.mu held.
func (s *Simulator) stopVM(vm *vmState) {
	s.markStopped(vm)
	if b, ok := s.boots[vm.vmid]; ok {
		b.cancel()
		delete(s.boots, vm.vmid)
	}
}

func (s *Simulator) postVMStop(rq *request) (any, *apiError) {
	return s.stopTask(rq, "qmstop", "POST /nodes/{node}/qemu/{vmid}/status/stop")
}

func (s *Simulator) postVMShutdown(rq *request) (any, *apiError) {
	return s.stopTask(rq, "qmshutdown", "POST /nodes/{node}/qemu/{vmid}/status/shutdown")
}

// runningTask is reboot and reset: both refuse a stopped VM synchronously.
func (s *Simulator) runningTask(rq *request, typ, endpoint string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	vm, err := s.vmRunningCheck(node, vmid)
	if err != nil {
		return nil, err
	}
	if vm.status != "running" {
		return nil, errf("VM %d not running", vmid)
	}
	work := taskWork{run: func(*task) error {
		vm, err := s.vmRunningCheck(node, vmid)
		if err != nil {
			return err
		}
		if err := lockErr(vm); err != nil {
			return err
		}
		if vm.status == "running" {
			vm.startedAt = time.Now()
			s.applyPending(vm)
		}
		return nil
	}}
	if s.qemu != nil {
		work.wait = func() { s.qemuReset(vmid) }
	}
	t := s.startTask(node, typ, vmidStr(vmid), rq.auth, work, endpoint)
	return t.upid, nil
}

func (s *Simulator) postVMReboot(rq *request) (any, *apiError) {
	return s.runningTask(rq, "qmreboot", "POST /nodes/{node}/qemu/{vmid}/status/reboot")
}

func (s *Simulator) postVMReset(rq *request) (any, *apiError) {
	return s.runningTask(rq, "qmreset", "POST /nodes/{node}/qemu/{vmid}/status/reset")
}

// postVMTemplate converts a stopped VM into a template; its disks become base images.
func (s *Simulator) postVMTemplate(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	check := func() (*vmState, *apiError) {
		vm, err := s.vmOnNode(node, vmid)
		if err != nil {
			return nil, err
		}
		if err := lockErr(vm); err != nil {
			return nil, err
		}
		if vm.isTemplate() {
			return nil, errf("you can't convert a template to a template")
		}
		if vm.status == "running" {
			return nil, errf("you can't convert a VM to template if VM is running")
		}
		return vm, nil
	}
	if _, err := check(); err != nil {
		return nil, err
	}
	t := s.startTask(node, "qmtemplate", vmidStr(vmid), rq.auth, taskWork{run: func(*task) error {
		vm, err := check()
		if err != nil {
			return err
		}
		for k, v := range vm.conf {
			d := parseDrive(v)
			if !isDriveKey(k) || d.isCDROM() || d.storage == "" || strings.HasPrefix(k, "unused") {
				continue
			}
			old := s.getVolumeOn(node, d.volid())
			base := strings.Replace(d.name, "vm-", "base-", 1)
			if old != nil {
				s.dropVolume(node, old.volid)
				old.volid = d.storage + ":" + base
				s.putVolume(node, old)
			}
			d.file = d.storage + ":" + base
			vm.conf[k] = d.String()
		}
		vm.conf["template"] = "1"
		return nil
	}}, "POST /nodes/{node}/qemu/{vmid}/template")
	return t.upid, nil
}
