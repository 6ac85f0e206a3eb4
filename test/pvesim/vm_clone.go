package pvesim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// postVMClone is qemu-server's clone_vm: early checks answer synchronously,
// the new VM appears at once with "lock: clone" and the qmclone task copies
// or links the disks, then unlocks it.
func (s *Simulator) postVMClone(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := rq.p
	node, vmid := p.get("node"), rq.vmid()
	newid, _ := strconv.Atoi(p.get("newid"))
	pool, storage, format, target := p.get("pool"), p.get("storage"), p.get("format"), p.get("target")
	if target == node {
		target = ""
	}
	if pool != "" {
		if _, ok := s.pools[pool]; !ok {
			return nil, errf("pool '%s' does not exist", pool)
		}
	}
	if target != "" && s.node(target) == nil {
		return nil, errf("no such cluster node '%s'", target)
	}
	if storage != "" {
		st := s.storage(storage)
		if st == nil || !st.onNode(node) {
			return nil, errf("storage '%s' does not exist", storage)
		}
		if !st.hasContent("images") {
			return nil, paramErr(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support vm images", storage)})
		}
		if target != "" && !st.shared {
			return nil, errf("can't clone to non-shared storage '%s'", storage)
		}
	}
	src, err := s.vmOnNode(node, vmid)
	if err != nil {
		return nil, err
	}
	if err := lockErr(src); err != nil {
		return nil, err
	}
	full := !src.isTemplate()
	if _, ok := p["full"]; ok {
		full = p.flag("full")
	}
	if storage != "" && !full {
		return nil, errf("parameter 'storage' not allowed for linked clones")
	}
	if format != "" && !full {
		return nil, errf("parameter 'format' not allowed for linked clones")
	}
	shared := true
	drives := []string{}
	for k, v := range src.conf {
		d := parseDrive(v)
		if !isDriveKey(k) || strings.HasPrefix(k, "unused") || d.isCDROM() || d.storage == "" {
			continue
		}
		drives = append(drives, k)
		if st := s.storage(d.storage); st == nil || !st.shared {
			shared = false
		}
		if !full && !strings.HasPrefix(d.name, "base-") {
			return nil, errf("Linked clone feature is not supported for '%s' (%s)", d.volid(), k)
		}
	}
	sort.Strings(drives)
	if target != "" && !shared {
		return nil, errf("can't clone VM to node '%s' (VM uses local storage)", target)
	}
	if existing, ok := s.vms[newid]; ok && existing.node == node {
		return nil, errf("unable to create VM %d: config file already exists", newid)
	}

	destNode := node
	if target != "" {
		destNode = target
	}
	clone := &vmState{vmid: newid, node: destNode, status: "stopped", conf: map[string]string{"lock": "clone"}}
	collision := false
	if _, ok := s.vms[newid]; ok {
		collision = true // exists on another node: pmxcfs refuses the config file in the task
	} else {
		s.vms[newid] = clone
	}
	srcConf := map[string]string{}
	for k, v := range src.conf {
		srcConf[k] = v
	}
	newConf := func() map[string]string {
		c := map[string]string{}
		for k, v := range srcConf {
			switch {
			case k == "template" || k == "lock" || strings.HasPrefix(k, "unused"):
			case strings.HasPrefix(k, "net") && hotplugKeyRe.MatchString(k):
				c[k] = s.regenerateMAC(v)
			default:
				c[k] = v
			}
		}
		c["smbios1"] = regenerateUUID(c["smbios1"], s.newUUID())
		if _, ok := c["vmgenid"]; ok {
			c["vmgenid"] = s.newUUID()
		}
		if name := p.get("name"); name != "" {
			c["name"] = name
		} else if n := srcConf["name"]; n != "" {
			c["name"] = "Copy-of-VM-" + n
		} else {
			c["name"] = "Copy-of-VM-" + vmidStr(vmid)
		}
		if desc := p.get("description"); desc != "" {
			c["description"] = desc
		}
		return c
	}()
	s.log.Info("clone", "source", vmid, "newid", newid, "full", full)
	diskBytes, diskLock := s.diskLoad(destNode, srcConf)
	if storage != "" {
		diskLock = s.storageLockName(destNode, storage)
	}
	load := taskLoad{Lock: diskLock, LockVMID: vmid, FailPrefix: "clone failed: "}
	if s.load != nil {
		load.Time = s.load.m.CloneTime(full, diskBytes)
	}

	t := s.startTask(node, "qmclone", vmidStr(vmid), rq.auth, taskWork{
		run: func(t *task) error {
			t.log = append(t.log, fmt.Sprintf("create %s clone of VM %d with ID %d", map[bool]string{true: "full", false: "linked"}[full], vmid, newid))
			if collision {
				return fmt.Errorf("clone failed: close (rename) atomic file '/etc/pve/nodes/%s/qemu-server/%d.conf' failed: File exists", destNode, newid)
			}
			if s.vms[newid] != clone {
				return fmt.Errorf("clone failed: VM %d vanished", newid)
			}
			for _, k := range drives {
				d := parseDrive(srcConf[k])
				size := parseSize(d.opts["size"])
				storeID := d.storage
				if storage != "" {
					storeID = storage
				}
				name := s.freeDiskName(destNode, storeID, newid)
				volid := storeID + ":" + name
				v := &volume{storage: storeID, content: "images", format: "raw", size: size, vmid: newid}
				if !full {
					volid = d.storage + ":" + d.name + "/" + name
					v.parent = d.name
				} else if format != "" {
					v.format = format
				}
				v.volid = volid
				s.putVolume(destNode, v)
				d.file = volid
				newConf[k] = d.String()
			}
			clone.conf = newConf
			if pool != "" {
				if pl, ok := s.pools[pool]; ok {
					pl.members[newid] = true
				}
			}
			if s.load != nil {
				s.load.countClone()
			}
			return nil
		},
		fail: func() {
			if s.vms[newid] == clone {
				delete(s.vms, newid)
			}
		},
		load: load,
	}, "POST /nodes/{node}/qemu/{vmid}/clone")
	return t.upid, nil
}

func (s *Simulator) regenerateMAC(v string) string {
	parts := strings.Split(v, ",")
	for i, part := range parts {
		k, val, ok := strings.Cut(part, "=")
		if ok && (k == "macaddr" || macRe.MatchString(val)) {
			parts[i] = k + "=" + s.randomMAC()
			return strings.Join(parts, ",")
		}
	}
	return v
}

func (s *Simulator) newUUID() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(s.rng.Intn(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func regenerateUUID(smbios, uuid string) string {
	parts := []string{"uuid=" + uuid}
	for _, part := range strings.Split(smbios, ",") {
		if part != "" && !strings.HasPrefix(part, "uuid=") {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, ",")
}

// putVMResize is resize_vm: every check runs inside the resize task.
func (s *Simulator) putVMResize(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	disk, sizeStr := rq.p.get("disk"), rq.p.get("size")
	if rq.p.flag("skiplock") && !rq.auth.isRoot() {
		return nil, paramErr(map[string]string{"skiplock": "Only root may use this option."})
	}
	t := s.startTask(node, "resize", vmidStr(vmid), rq.auth, taskWork{run: func(*task) error {
		vm, err := s.vmOnNode(node, vmid)
		if err != nil {
			return err
		}
		if d := rq.p.get("digest"); d != "" && d != vm.digest() {
			return errf("checksum mismatch (file change by other user?)")
		}
		if !rq.p.flag("skiplock") {
			if err := lockErr(vm); err != nil {
				return err
			}
		}
		val, ok := vm.conf[disk]
		if !ok {
			return errf("disk '%s' does not exist", disk)
		}
		d := parseDrive(val)
		if d.isCDROM() {
			return errf("you can't resize a cdrom")
		}
		cur := parseSize(d.opts["size"])
		if v := s.getVolumeOn(node, d.volid()); v != nil {
			cur = v.size
		}
		rel := strings.HasPrefix(sizeStr, "+")
		newSize := parseSize(strings.TrimPrefix(sizeStr, "+"))
		if rel {
			newSize += cur
		}
		if newSize < cur {
			return errf("shrinking disks is not supported")
		}
		if newSize == cur {
			return nil
		}
		if v := s.getVolumeOn(node, d.volid()); v != nil {
			v.size = newSize
		}
		d.set("size", formatSize(newSize))
		vm.conf[disk] = d.String()
		return nil
	}}, "PUT /nodes/{node}/qemu/{vmid}/resize")
	return t.upid, nil
}

// deleteVM is destroy_vm: existence, protection and running are checked at
// once; the qmdestroy task removes disks (not cdrom ISOs) and the config.
func (s *Simulator) deleteVM(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, vmid := rq.p.get("node"), rq.vmid()
	skiplock := rq.p.flag("skiplock")
	if skiplock && !rq.auth.isRoot() {
		return nil, paramErr(map[string]string{"skiplock": "Only root may use this option."})
	}
	early := func() (*vmState, *apiError) {
		vm, err := s.vmOnNode(node, vmid)
		if err != nil {
			return nil, err
		}
		if vm.conf["protection"] == "1" {
			return nil, errf("can't remove VM %d - protection mode enabled", vmid)
		}
		if vm.status == "running" {
			return nil, errf("VM %d is running - destroy failed", vmid)
		}
		return vm, nil
	}
	if _, err := early(); err != nil {
		return nil, err
	}
	purgeUnreferenced := rq.p.flag("destroy-unreferenced-disks")
	var load taskLoad
	if s.load != nil {
		vm := s.vms[vmid]
		diskBytes, diskLock := s.diskLoad(node, vm.conf)
		load = taskLoad{Lock: diskLock, LockVMID: vmid,
			Time: s.load.m.TaskTime + time.Duration(float64(diskBytes)/float64(1<<30)*float64(s.load.m.DestroyPerGiB))}
	}
	t := s.startTask(node, "qmdestroy", vmidStr(vmid), rq.auth, taskWork{load: load, run: func(*task) error {
		vm, err := early()
		if err != nil {
			return err
		}
		if !skiplock {
			if err := lockErr(vm); err != nil {
				return err
			}
		}
		if vm.isTemplate() {
			for _, v := range s.volumes {
				if v.parent != "" && v.vmid != vmid && strings.HasPrefix(v.volid, v.storage+":"+v.parent+"/") {
					for _, k := range sortedKeys(vm.conf) {
						if d := parseDrive(vm.conf[k]); isDriveKey(k) && d.name == v.parent {
							return errf("base volume '%s' is still in use by linked cloned VM %d", d.volid(), v.vmid)
						}
					}
				}
			}
		}
		s.destroyVM(vm, purgeUnreferenced)
		return nil
	}}, "DELETE /nodes/{node}/qemu/{vmid}")
	return t.upid, nil
}

// destroyVM removes a VM, its owned disks and its pool membership. Called with s.mu held.
func (s *Simulator) destroyVM(vm *vmState, purgeUnreferenced bool) {
	for k, v := range vm.conf {
		d := parseDrive(v)
		if !isDriveKey(k) || d.isCDROM() || d.storage == "" {
			continue
		}
		if vol := s.getVolumeOn(vm.node, d.volid()); vol != nil && vol.vmid == vm.vmid {
			s.dropVolume(vm.node, d.volid())
		}
	}
	if purgeUnreferenced {
		for key, v := range s.volumes {
			if v.vmid == vm.vmid && v.content == "images" {
				delete(s.volumes, key)
			}
		}
	}
	for _, p := range s.pools {
		delete(p.members, vm.vmid)
	}
	// qemu-server's destroy also drops the VM's firewall config and its NICs' IPAM entries.
	s.dropVMAddresses(vm)
	delete(s.fw.vms, vm.vmid)
	s.dropReplicationJobs(vm.vmid)
	if b, ok := s.boots[vm.vmid]; ok {
		b.cancel()
		delete(s.boots, vm.vmid)
	}
	if s.qemu != nil {
		s.qemu.Forget(strconv.Itoa(vm.vmid))
	}
	delete(s.vms, vm.vmid)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
