package pvesim

import (
	"fmt"
	"sort"
	"strings"
)

// Storage definitions (/etc/pve/storage.cfg) through /storage, and storages as pool members. A
// definition has no free-text field; deleting it leaves the data where it is and drops the
// storage from every pool and ACL, as PVE's remove_storage_access does.

// storageTypeOptions are the options each storage type takes and those it requires.
var storageTypeOptions = map[string]struct {
	allowed, required []string
	content           []string
	shared            bool
}{
	"dir":     {allowed: []string{"path", "nodes", "content", "shared", "disable", "mkdir", "create-base-path", "create-subdirs", "is_mountpoint", "preallocation", "prune-backups", "max-protected-backups", "content-dirs", "format"}, required: []string{"path"}, content: []string{"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import"}},
	"zfspool": {allowed: []string{"pool", "nodes", "content", "disable", "sparse", "blocksize", "mountpoint"}, required: []string{"pool"}, content: []string{"images", "rootdir"}},
	"lvmthin": {allowed: []string{"vgname", "thinpool", "nodes", "content", "disable"}, required: []string{"vgname", "thinpool"}, content: []string{"images", "rootdir"}},
	"lvm":     {allowed: []string{"vgname", "base", "nodes", "content", "disable", "shared", "saferemove", "saferemove_throughput", "tagged_only"}, required: []string{"vgname"}, content: []string{"images", "rootdir"}},
	"nfs":     {allowed: []string{"server", "export", "path", "nodes", "content", "disable", "options", "mkdir", "create-base-path", "create-subdirs", "preallocation", "prune-backups", "max-protected-backups", "content-dirs", "format"}, required: []string{"server", "export"}, content: []string{"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import"}, shared: true},
	"pbs":     {allowed: []string{"server", "datastore", "username", "password", "fingerprint", "encryption-key", "master-pubkey", "namespace", "port", "nodes", "content", "disable", "prune-backups", "max-protected-backups"}, required: []string{"server", "datastore"}, content: []string{"backup"}, shared: true},
}

// storageFeatures: only ZFS volumes can be replicated (volume_has_feature 'replicate').
func storageHasReplicate(typ string) bool { return typ == "zfspool" }

func (s *Simulator) postStorage(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, typ := rq.p.get("storage"), rq.p.get("type")
	opts, known := storageTypeOptions[typ]
	if !known {
		return nil, errf("create storage failed: storage type '%s' is not supported by the simulator", typ)
	}
	errs := map[string]string{}
	allowed := map[string]bool{"storage": true, "type": true}
	for _, k := range opts.allowed {
		allowed[k] = true
	}
	for k := range rq.p {
		if !allowed[k] {
			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
		}
	}
	for _, k := range opts.required {
		if rq.p.get(k) == "" {
			errs[k] = "property is missing and it is not optional"
		}
	}
	content := splitList(rq.p.get("content"))
	if len(content) == 0 {
		content = opts.content[:1]
	}
	for _, c := range content {
		ok := false
		for _, a := range opts.content {
			ok = ok || a == c
		}
		if !ok {
			errs["content"] = fmt.Sprintf("storage does not support content type '%s'", c)
		}
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if s.storage(id) != nil {
		return nil, errf("create storage failed: storage ID '%s' already defined", id)
	}
	def := &storageDef{name: id, typ: typ, content: content, shared: opts.shared || rq.p.flag("shared"),
		total: int64(1) << 40, conf: map[string]string{}}
	sort.Strings(def.content)
	for _, k := range opts.allowed {
		if v, ok := rq.p.str(k); ok && k != "content" && k != "nodes" {
			def.conf[k] = v
		}
	}
	if nodes := splitList(rq.p.get("nodes")); len(nodes) > 0 {
		def.nodes = map[string]bool{}
		for _, n := range nodes {
			def.nodes[n] = true
		}
	}
	s.storages = append(s.storages, def)
	return map[string]any{"storage": id, "type": typ}, nil
}

func (s *Simulator) storageConfigJSON(def *storageDef) map[string]any {
	e := map[string]any{"storage": def.name, "type": def.typ, "content": strings.Join(def.content, ","),
		"digest": fwDigest(len(s.storages))}
	for k, v := range def.conf {
		e[k] = v
	}
	if def.shared {
		e["shared"] = 1
	}
	if def.nodes != nil {
		var nodes []string
		for n := range def.nodes {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		e["nodes"] = strings.Join(nodes, ",")
	}
	return e
}

func (s *Simulator) getStorageDefs(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, def := range s.storages {
		if t := rq.p.get("type"); t != "" && def.typ != t {
			continue
		}
		out = append(out, s.storageConfigJSON(def))
	}
	return out, nil
}

func (s *Simulator) getStorageDef(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	def := s.storage(rq.p.get("storage"))
	if def == nil {
		return nil, errf("storage '%s' does not exist", rq.p.get("storage"))
	}
	return s.storageConfigJSON(def), nil
}

func (s *Simulator) deleteStorageDef(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("storage")
	for i, def := range s.storages {
		if def.name != id {
			continue
		}
		s.storages = append(s.storages[:i:i], s.storages[i+1:]...)
		for _, p := range s.pools {
			delete(p.storage, id)
		}
		return nil, nil
	}
	return nil, errf("delete storage failed: storage '%s' does not exist", id)
}

// updatePoolStorage adds or removes storage members of a pool, as PVE's update_pool does.
func (s *Simulator) updatePoolStorage(p *poolState, list string, remove bool) *apiError {
	for _, id := range splitList(list) {
		if p.storage == nil {
			p.storage = map[string]bool{}
		}
		if remove {
			if !p.storage[id] {
				return errf("update pools failed: storage '%s' is not a pool member", id)
			}
			delete(p.storage, id)
			continue
		}
		if s.storage(id) == nil {
			return errf("update pools failed: storage '%s' does not exist", id)
		}
		if p.storage[id] {
			return errf("update pools failed: storage '%s' is already a pool member", id)
		}
		p.storage[id] = true
	}
	return nil
}

// poolStorageMembers renders a pool's storages as GET /pools/{poolid} does: one member per node
// the storage is on.
func (s *Simulator) poolStorageMembers(p *poolState) []map[string]any {
	var out []map[string]any
	var ids []string
	for id := range p.storage {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		def := s.storage(id)
		if def == nil {
			continue
		}
		for _, n := range s.nodes {
			if def.onNode(n.name) {
				out = append(out, map[string]any{"id": "storage/" + n.name + "/" + id, "type": "storage",
					"storage": id, "node": n.name, "plugintype": def.typ, "shared": boolInt(def.shared), "content": strings.Join(def.content, ",")})
			}
		}
	}
	return out
}

// StorageDefined reports whether a storage is defined, and the pools it is a member of.
func (s *Simulator) StorageDefined(name string) (bool, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pools []string
	for id, p := range s.pools {
		if p.storage[name] {
			pools = append(pools, id)
		}
	}
	sort.Strings(pools)
	return s.storage(name) != nil, pools
}
