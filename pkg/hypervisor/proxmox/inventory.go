package proxmox

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Verify checks reachability, credentials and privileges and returns the PVE version.
func (p *Provider) Verify(ctx context.Context) (string, error) {
	const op = "verify"
	var v struct {
		Version string `json:"version"`
		Release string `json:"release"`
	}
	if err := p.get(ctx, op, "/version", &v); err != nil {
		return "", err
	}
	var perms map[string]map[string]number
	if err := p.get(ctx, op, "/access/permissions", &perms); err != nil {
		return "", err
	}
	if missing := missingPrivileges(perms, requiredPrivileges(p.cfg.ISOStorage)); len(missing) > 0 {
		return v.Version, hypervisor.Errorf(hypervisor.ErrForbidden, op,
			"the credentials lack privileges HyperFleet needs: %s", strings.Join(missing, ", "))
	}
	var features []string
	for _, f := range featurePrivileges() {
		if missing := missingPrivileges(perms, []privilegeRule{f.rule}); len(missing) > 0 {
			features = append(features, missing[0]+" ("+f.feature+")")
		}
	}
	p.featureMu.Lock()
	p.missingFeatures, p.featuresKnown = features, true
	p.featureMu.Unlock()
	return v.Version, nil
}

// featurePrivilege is a privilege only an optional feature uses, and the feature.
type featurePrivilege struct {
	rule    privilegeRule
	feature string
}

// featurePrivileges are the privileges long-lived VMs' features use, checked at Verify and
// reported, never required (docs/proxmox.md, "Privileges for long-lived VMs").
func featurePrivileges() []featurePrivilege {
	vm := func(p ...string) privilegeRule { return privilegeRule{privs: p, path: "/vms"} }
	return []featurePrivilege{
		{vm("VM.Snapshot"), "MachineSnapshots and their schedules"},
		{vm("VM.Snapshot.Rollback"), "MachineSnapshotRestores"},
		// PVE 9 splits running commands in the guest out of VM.Monitor.
		{vm("VM.GuestAgent.Unrestricted", "VM.Monitor"), "preStart and preStop hooks"},
		{vm("VM.Migrate"), "MachineMigrations, host drains and the LiveMigratable condition"},
	}
}

var _ hypervisor.FeaturePrivileges = (*Provider)(nil)

// MissingFeaturePrivileges is what the last Verify found missing of featurePrivileges.
func (p *Provider) MissingFeaturePrivileges() ([]string, bool) {
	p.featureMu.Lock()
	defer p.featureMu.Unlock()
	return slices.Clone(p.missingFeatures), p.featuresKnown
}

// privilegeRule is one privilege (any of privs) needed on path, or anywhere below it when under.
type privilegeRule struct {
	privs []string
	path  string
	under bool
}

func requiredPrivileges(isoStorage string) []privilegeRule {
	vm := func(p ...string) privilegeRule { return privilegeRule{privs: p, path: "/vms"} }
	return []privilegeRule{
		vm("VM.Allocate"), vm("VM.Clone"), vm("VM.Audit"), vm("VM.PowerMgmt"),
		vm("VM.Config.CPU"), vm("VM.Config.Memory"), vm("VM.Config.Network"), vm("VM.Config.Options"),
		vm("VM.Config.Disk"), vm("VM.Config.CDROM"),
		// PVE 9 splits guest agent access out of VM.Monitor.
		vm("VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted", "VM.Monitor"),
		{privs: []string{"Datastore.AllocateSpace"}, path: "/storage", under: true},
		{privs: []string{"Datastore.AllocateTemplate"}, path: "/storage/" + isoStorage},
		// Deleting an uploaded ISO needs Datastore.Allocate, not just AllocateTemplate.
		{privs: []string{"Datastore.Allocate"}, path: "/storage/" + isoStorage},
		{privs: []string{"Sys.Audit"}, path: "/nodes"},
		// PVE 8+ checks SDN.Use on the bridge of every NIC a VM gets.
		{privs: []string{"SDN.Use"}, path: "/sdn", under: true},
	}
}

// missingPrivileges compares /access/permissions (path -> privilege -> propagate) with the rules.
// A privilege counts on the path itself, on an ancestor that propagates it, or for "under" rules
// on any path below.
func missingPrivileges(perms map[string]map[string]number, rules []privilegeRule) []string {
	has := func(priv string, r privilegeRule) bool {
		for path, privs := range perms {
			prop, ok := privs[priv]
			if !ok {
				continue
			}
			switch {
			case path == r.path,
				r.under && strings.HasPrefix(path, r.path+"/"),
				prop != 0 && (path == "/" || strings.HasPrefix(r.path, path+"/")):
				return true
			}
		}
		return false
	}
	var missing []string
	for _, r := range rules {
		if !slices.ContainsFunc(r.privs, func(priv string) bool { return has(priv, r) }) {
			missing = append(missing, strings.Join(r.privs, "|")+" on "+r.path)
		}
	}
	return missing
}

// Nodes lists the cluster's hosts. The HypervisorCluster's allowedNodes are applied by its
// callers, once, for every provider alike.
func (p *Provider) Nodes(ctx context.Context) ([]hypervisor.Node, error) {
	var rows []struct {
		Node   string `json:"node"`
		Status string `json:"status"`
		MaxCPU number `json:"maxcpu"`
		MaxMem number `json:"maxmem"`
		Mem    number `json:"mem"`
	}
	if err := p.get(ctx, "list nodes", "/nodes", &rows); err != nil {
		return nil, err
	}
	var nodes []hypervisor.Node
	for _, r := range rows {
		n := hypervisor.Node{Name: r.Node, Online: r.Status == "online", CPUs: int(r.MaxCPU), MemoryTotal: uint64(r.MaxMem)}
		if r.MaxMem > r.Mem {
			n.MemoryFree = uint64(r.MaxMem - r.Mem)
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// config reads a VM's configuration with every value as a string (PVE mixes numbers and strings).
func (p *Provider) config(ctx context.Context, op string, ref hypervisor.VMRef) (map[string]string, error) {
	var raw map[string]json.RawMessage
	if err := p.get(ctx, op, vmPath(ref, "/config"), &raw); err != nil {
		return nil, err
	}
	cfg := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		cfg[k] = s
	}
	return cfg, nil
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// bootDisk finds the first disk in the boot order ("order=scsi0;ide2;net0"), falling back to the
// legacy bootdisk key and then to the first disk present.
func bootDisk(cfg map[string]string) string {
	isDisk := func(key string) bool {
		v, ok := cfg[key]
		return ok && !strings.Contains(v, "media=cdrom") && !strings.Contains(v, "cloudinit") &&
			(strings.HasPrefix(key, "scsi") || strings.HasPrefix(key, "virtio") || strings.HasPrefix(key, "sata") || strings.HasPrefix(key, "ide"))
	}
	if order, ok := strings.CutPrefix(cfg["boot"], "order="); ok {
		for _, key := range strings.Split(order, ";") {
			if isDisk(key) {
				return key
			}
		}
	}
	if isDisk(cfg["bootdisk"]) {
		return cfg["bootdisk"]
	}
	for _, key := range []string{"scsi0", "virtio0", "sata0", "ide0"} {
		if isDisk(key) {
			return key
		}
	}
	return ""
}

// driveSizeGiB reads size= from a drive string such as "local-lvm:base-9000-disk-0,size=8G".
func driveSizeGiB(drive string) (int, bool) {
	for _, part := range strings.Split(drive, ",") {
		v, ok := strings.CutPrefix(part, "size=")
		if !ok || v == "" {
			continue
		}
		mult := 1.0
		switch v[len(v)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			v = v[:len(v)-1]
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		return int(math.Floor(f * mult / (1 << 30))), true
	}
	return 0, false
}

// Capabilities: PVE makes linked clones, lets the caller choose VMIDs, runs long operations as
// tasks and tags VMs.
func (p *Provider) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{LinkedClones: true, PreallocatedIDs: true, AsyncTasks: true, Tags: true, ExtraDisks: true,
		NICs: true, StartOnConfigure: true, Storages: true}
}

// NextID proposes a free VMID. Without a minimum it asks /cluster/nextid; with one it picks the
// lowest VMID at or above min that no VM or container uses, from the provider's last listing of
// the cluster's VMs when that is younger than VMIDListingMaxAge (the sweep lists them every
// interval), and otherwise from a new listing.
func (p *Provider) NextID(ctx context.Context, minID int) (int, error) {
	const op = "next VMID"
	if minID <= 100 {
		var id number
		if err := p.get(ctx, op, "/cluster/nextid", &id); err != nil {
			return 0, err
		}
		if int(id) >= minID {
			return int(id), nil
		}
	}
	if id, ok := p.vmids.proposeFromListing(minID, VMIDListingMaxAge); ok {
		return id, nil
	}
	if _, err := p.listVMs(ctx, op); err != nil {
		return 0, err
	}
	id, _ := p.vmids.proposeFromListing(minID, VMIDListingMaxAge)
	return id, nil
}
