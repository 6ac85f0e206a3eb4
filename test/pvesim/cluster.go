package pvesim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

func (s *Simulator) getVersion(*request) (any, *apiError) {
	return map[string]any{"version": "9.1.3", "release": "9.1", "repoid": "f5b4a8c2e9d3b1a0"}, nil
}

func (s *Simulator) getNodes(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, n := range s.nodes {
		e := map[string]any{"node": n.name, "id": "node/" + n.name, "type": "node", "status": "offline",
			"ssl_fingerprint": "5C:AF:1E:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:" + fmt.Sprintf("%02X", n.id)}
		if n.online {
			e["status"] = "online"
			e["level"] = ""
			e["maxcpu"] = n.cpus
			e["maxmem"] = n.maxmem
			e["mem"] = s.usedMem(n)
			e["cpu"] = 0.05
			e["uptime"] = int64(time.Since(processStart).Seconds()) + 86400
			e["maxdisk"] = int64(100) << 30
			e["disk"] = int64(12) << 30
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Simulator) getNodeStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(rq.p.get("node"))
	used := s.usedMem(n)
	return map[string]any{
		"uptime":     int64(time.Since(processStart).Seconds()) + 86400,
		"cpu":        0.05,
		"wait":       0,
		"idle":       0,
		"loadavg":    []string{"0.42", "0.38", "0.30"},
		"kversion":   "Linux 6.14.11-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.11-4",
		"pveversion": "pve-manager/9.1.3/f5b4a8c2e9d3b1a0",
		"cpuinfo": map[string]any{"cpus": n.cpus, "cores": n.cpus / 2, "sockets": 1, "model": "AMD EPYC 7302P 16-Core Processor",
			"mhz": "3000.000", "hvm": "1", "user_hz": 100, "flags": "fpu vme de pse tsc msr pae mce"},
		"memory":         map[string]any{"total": n.maxmem, "used": used, "free": n.maxmem - used, "available": n.maxmem - used},
		"swap":           map[string]any{"total": 0, "used": 0, "free": 0},
		"rootfs":         map[string]any{"total": int64(100) << 30, "used": int64(12) << 30, "avail": int64(88) << 30, "free": int64(88) << 30},
		"ksm":            map[string]any{"shared": 0},
		"boot-info":      map[string]any{"mode": "efi", "secureboot": 0},
		"current-kernel": map[string]any{"sysname": "Linux", "release": "6.14.11-4-pve", "machine": "x86_64", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.11-4"},
	}, nil
}

func (s *Simulator) getClusterStatus(*request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{{"id": "cluster", "type": "cluster", "name": s.cluster, "nodes": len(s.nodes), "quorate": 1, "version": len(s.nodes) + 2}}
	for _, n := range s.nodes {
		online := 0
		if n.online {
			online = 1
		}
		out = append(out, map[string]any{"id": "node/" + n.name, "type": "node", "name": n.name, "nodeid": n.id,
			"ip": fmt.Sprintf("192.0.2.%d", 10+n.id), "online": online, "level": "", "local": boolInt(n.id == 1)})
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// getNextID is /cluster/nextid. PVE answers a string either way: the checked
// VMID comes from the query, and the computed one is stringified by its use
// as a hash key before being returned.
func (s *Simulator) getNextID(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := rq.p.str("vmid"); ok {
		n, _ := strconv.Atoi(v)
		if _, used := s.vms[n]; used {
			return nil, paramErr(map[string]string{"vmid": fmt.Sprintf("VM %s already exists", v)})
		}
		return v, nil
	}
	for i := 100; i < 1_000_000; i++ {
		if _, used := s.vms[i]; !used {
			return strconv.Itoa(i), nil
		}
	}
	return nil, errf("unable to get any free VMID in range [100, 1000000]")
}

// getResources is /cluster/resources; ?type=vm lists every VM in one call.
func (s *Simulator) getResources(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := rq.p.get("type")
	out := []map[string]any{}
	if typ == "" || typ == "pool" {
		for _, id := range sortedPoolIDs(s.pools) {
			out = append(out, map[string]any{"id": "/pool/" + id, "pool": id, "type": "pool"})
		}
	}
	if typ == "" || typ == "vm" {
		omitted := s.omittedNodes("GET /cluster/resources")
		for _, vm := range s.sortedVMs() {
			if !rq.auth.has("VM.Audit") || omitted[vm.node] {
				continue
			}
			st := s.vmStatus(vm, false)
			e := map[string]any{
				"id": fmt.Sprintf("qemu/%d", vm.vmid), "type": "qemu", "vmid": vm.vmid, "node": vm.node,
				"name": st["name"], "status": vm.status, "template": boolInt(vm.isTemplate()),
				"maxcpu": st["cpus"], "cpu": st["cpu"], "maxmem": vm.maxmem(), "mem": st["mem"],
				"maxdisk": vm.bootDiskSize(), "disk": 0, "uptime": st["uptime"], "netin": 0, "netout": 0,
				"diskread": 0, "diskwrite": 0, "memhost": st["memhost"],
			}
			if t, ok := vm.conf["tags"]; ok {
				e["tags"] = t
			}
			if l := vm.conf["lock"]; l != "" {
				e["lock"] = l
			}
			for _, id := range sortedPoolIDs(s.pools) {
				if s.pools[id].members[vm.vmid] {
					e["pool"] = id
				}
			}
			out = append(out, e)
		}
	}
	if typ == "" || typ == "node" {
		for _, n := range s.nodes {
			e := map[string]any{"id": "node/" + n.name, "node": n.name, "type": "node", "status": "offline", "cgroup-mode": 2}
			if n.online {
				e["status"], e["level"] = "online", ""
				e["maxcpu"], e["cpu"] = n.cpus, 0.05
				e["maxmem"], e["mem"] = n.maxmem, s.usedMem(n)
				e["maxdisk"], e["disk"] = int64(100)<<30, int64(12)<<30
				e["uptime"] = int64(time.Since(processStart).Seconds()) + 86400
			}
			out = append(out, e)
		}
	}
	if typ == "" || typ == "storage" {
		for _, n := range s.nodes {
			for _, st := range s.storages {
				if !st.onNode(n.name) {
					continue
				}
				used := s.storageUsed(n.name, st)
				out = append(out, map[string]any{
					"id": "storage/" + n.name + "/" + st.name, "storage": st.name, "node": n.name, "type": "storage",
					"plugintype": st.typ, "status": "available", "shared": boolInt(st.shared),
					"content": strings.Join(st.content, ","), "maxdisk": st.total, "disk": used,
				})
			}
		}
	}
	return out, nil
}

func sortedPoolIDs(m map[string]*poolState) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// --- pools -------------------------------------------------------------------

func (s *Simulator) poolJSON(p *poolState, withMembers bool) map[string]any {
	e := map[string]any{"poolid": p.id}
	if p.comment != "" {
		e["comment"] = p.comment
	}
	if withMembers {
		members := []map[string]any{}
		ids := []int{}
		for id := range p.members {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			if vm, ok := s.vms[id]; ok {
				members = append(members, map[string]any{"id": fmt.Sprintf("qemu/%d", id), "type": "qemu", "vmid": id,
					"node": vm.node, "name": vm.conf["name"], "status": vm.status, "template": boolInt(vm.isTemplate())})
			}
		}
		members = append(members, s.poolStorageMembers(p)...)
		e["members"] = members
	}
	return e
}

func (s *Simulator) getPools(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	want := rq.p.get("poolid")
	for _, id := range sortedPoolIDs(s.pools) {
		if want != "" && id != want {
			continue
		}
		out = append(out, s.poolJSON(s.pools[id], want != ""))
	}
	if want != "" && len(out) == 0 {
		return nil, errf("pool '%s' does not exist", want)
	}
	return out, nil
}

func (s *Simulator) getPool(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pools[rq.p.get("poolid")]
	if !ok {
		return nil, errf("pool '%s' does not exist", rq.p.get("poolid"))
	}
	return s.poolJSON(p, true), nil
}

func (s *Simulator) postPool(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("poolid")
	if _, ok := s.pools[id]; ok {
		return nil, errf("create failed - pool '%s' already exists", id)
	}
	s.pools[id] = &poolState{id: id, comment: rq.p.get("comment"), members: map[int]bool{}}
	return nil, nil
}

func (s *Simulator) updatePool(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("poolid")
	p, ok := s.pools[id]
	if !ok {
		return nil, errf("update failed - pool '%s' does not exist", id)
	}
	if c, ok := rq.p.str("comment"); ok {
		p.comment = c
	}
	if err := s.updatePoolStorage(p, rq.p.get("storage"), rq.p.flag("delete")); err != nil {
		return nil, err
	}
	for _, v := range splitList(rq.p.get("vms")) {
		n, _ := strconv.Atoi(v)
		if _, ok := s.vms[n]; !ok {
			return nil, errf("no such VMID '%d'", n)
		}
		if rq.p.flag("delete") {
			delete(p.members, n)
			continue
		}
		for oid, other := range s.pools {
			if other.members[n] && oid != id {
				if !rq.p.flag("allow-move") {
					return nil, errf("VM %d belongs already to pool '%s' and allow-move is not set", n, oid)
				}
				delete(other.members, n)
			}
		}
		p.members[n] = true
	}
	return nil, nil
}

func (s *Simulator) putPools(rq *request) (any, *apiError) { return s.updatePool(rq) }
func (s *Simulator) putPool(rq *request) (any, *apiError)  { return s.updatePool(rq) }

func (s *Simulator) removePool(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("poolid")
	p, ok := s.pools[id]
	if !ok {
		return nil, errf("delete pool failed: pool '%s' does not exist", id)
	}
	if len(p.members) > 0 || len(p.storage) > 0 {
		return nil, errf("delete pool failed: pool is not empty.")
	}
	delete(s.pools, id)
	return nil, nil
}

func (s *Simulator) deletePools(rq *request) (any, *apiError) { return s.removePool(rq) }
func (s *Simulator) deletePool(rq *request) (any, *apiError)  { return s.removePool(rq) }
