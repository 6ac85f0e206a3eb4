package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Storages. A PVE storage definition has no free-text field to carry a mark, so a storage
// HyperFleet defines joins the installation's resource pool, "hf-storage-<hash>" (the owner tag's
// hash), whose comment carries the mark: a storage is ours when it is a member of that pool and
// the pool's comment holds our mark. Pool membership is what PVE itself shows and keeps with the
// definition (deleting a storage drops it from its pools), costs no extra object per storage, and
// a same-named storage someone else defined is never in our pool. The definition is created
// before it can join the pool: a crash between the two calls leaves an unmarked definition, which
// HyperFleet then refuses (ErrNotOwned) until a person deletes or adopts it.

// storageTypes are the storage types HyperFleet defines, with the options each needs.
var storageTypes = map[string][]string{
	"dir":     {"path"},
	"zfspool": {"pool"},
	"lvmthin": {"pool"},
	"nfs":     {"server", "export"},
}

func (p *Provider) storagePoolID() string {
	return "hf-storage-" + strings.TrimPrefix(p.ownerTag, ownerTagPrefix)
}

// StorageGaps implements hypervisor.Storager.
func (p *Provider) StorageGaps(sp hypervisor.StoragePool) []hypervisor.StorageGap {
	var gaps []hypervisor.StorageGap
	if sp.Adopt {
		return nil // an adopted storage is used as it is
	}
	if _, ok := storageTypes[sp.Type]; !ok {
		gaps = append(gaps, hypervisor.StorageGap{Field: "spec.type",
			Reason: fmt.Sprintf("HyperFleet defines PVE storages of type dir, zfspool, lvmthin and nfs, not %q; define it in PVE and adopt it", sp.Type)})
	}
	if sp.Encrypted {
		gaps = append(gaps, hypervisor.StorageGap{Field: "spec.encrypted",
			Reason: "PVE encrypts only Proxmox Backup Server storages (encryption-key); use an encrypted ZFS dataset or LUKS below the storage and adopt it"})
	}
	return gaps
}

// storageConfig is GET /storage/{storage}.
type storageConfig struct {
	Storage string `json:"storage"`
	Type    string `json:"type"`
	Nodes   string `json:"nodes"`
	Shared  number `json:"shared"`
}

// poolInfo is GET /pools/{poolid}.
type poolInfo struct {
	Comment string `json:"comment"`
	Members []struct {
		Type    string `json:"type"`
		Storage string `json:"storage"`
	} `json:"members"`
}

func (pi poolInfo) hasStorage(name string) bool {
	for _, m := range pi.Members {
		if m.Type == "storage" && m.Storage == name {
			return true
		}
	}
	return false
}

// readStoragePool reads our storage pool; nil when it does not exist. A pool of that ID without
// our mark is ErrNotOwned.
func (p *Provider) readStoragePool(ctx context.Context, op string) (*poolInfo, error) {
	var pi poolInfo
	err := p.get(ctx, op, "/pools/"+p.storagePoolID(), &pi)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !strings.Contains(pi.Comment, markPrefix+" "+p.ownerTag) {
		return nil, hypervisor.Errorf(hypervisor.ErrNotOwned, op, "resource pool %s (comment %q) lacks the mark %s %s", p.storagePoolID(), pi.Comment, markPrefix, p.ownerTag)
	}
	return &pi, nil
}

func (p *Provider) readStorage(ctx context.Context, op, name string) (*storageConfig, error) {
	if !storageNameRe.MatchString(name) {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "storage name %q is not a PVE storage ID", name)
	}
	var sc storageConfig
	err := p.get(ctx, op, "/storage/"+url.PathEscape(name), &sc)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil, nil
	}
	return &sc, err
}

// EnsureStorage implements hypervisor.Storager.
func (p *Provider) EnsureStorage(ctx context.Context, sp hypervisor.StoragePool) error {
	op := "ensure storage " + sp.Name
	have, err := p.readStorage(ctx, op, sp.Name)
	if err != nil {
		return err
	}
	if sp.Adopt {
		if have == nil {
			return hypervisor.Errorf(hypervisor.ErrNotFound, op, "storage %s to adopt is not defined", sp.Name)
		}
		return nil
	}
	if err := p.checkOwner(op, sp.Owner); err != nil {
		return err
	}
	if gaps := p.StorageGaps(sp); len(gaps) > 0 {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%s: %s", gaps[0].Field, gaps[0].Reason)
	}
	pool, err := p.readStoragePool(ctx, op)
	if err != nil {
		return err
	}
	if have != nil {
		if pool == nil || !pool.hasStorage(sp.Name) {
			return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "storage %s exists and is not in resource pool %s", sp.Name, p.storagePoolID())
		}
		return nil // definitions are not changed once made
	}
	params, err := storageParams(sp)
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	if pool == nil {
		comment := fmt.Sprintf("Storages HyperFleet defined for %s.\n%s %s", p.cfg.Cluster, markPrefix, p.ownerTag)
		err := p.post(ctx, op, "/pools", map[string]any{"poolid": p.storagePoolID(), "comment": comment}, nil)
		if err != nil && !errors.Is(err, hypervisor.ErrAlreadyExists) {
			return err
		}
	}
	if err := p.post(ctx, op, "/storage", params, nil); err != nil {
		return err
	}
	return p.put(ctx, op, "/pools/"+p.storagePoolID(), map[string]any{"storage": sp.Name}, nil)
}

func storageParams(sp hypervisor.StoragePool) (map[string]any, error) {
	params := map[string]any{"storage": sp.Name, "type": sp.Type}
	vals := map[string]string{"path": sp.Path, "pool": sp.Pool, "server": sp.Server, "export": sp.Export}
	for _, k := range storageTypes[sp.Type] {
		if vals[k] == "" {
			return nil, fmt.Errorf("a %s storage needs %s", sp.Type, k)
		}
	}
	switch sp.Type {
	case "dir":
		params["path"] = sp.Path
	case "zfspool":
		params["pool"] = sp.Pool
	case "lvmthin":
		// Pool is "vg/thinpool" for an LVM thin pool.
		vg, thin, ok := strings.Cut(sp.Pool, "/")
		if !ok {
			return nil, fmt.Errorf("an lvmthin storage's pool is \"<volume group>/<thin pool>\", not %q", sp.Pool)
		}
		params["vgname"], params["thinpool"] = vg, thin
	case "nfs":
		params["server"], params["export"] = sp.Server, sp.Export
	}
	if len(sp.Nodes) > 0 {
		params["nodes"] = strings.Join(sp.Nodes, ",")
	}
	if len(sp.Content) > 0 {
		params["content"] = strings.Join(sp.Content, ",")
	}
	return params, nil
}

// DeleteStorage implements hypervisor.Storager: the definition goes (PVE drops it from its pools
// with it); the data on it stays.
func (p *Provider) DeleteStorage(ctx context.Context, name string, owner hypervisor.Ownership) error {
	op := "delete storage " + name
	if err := p.checkOwner(op, owner); err != nil {
		return err
	}
	have, err := p.readStorage(ctx, op, name)
	if err != nil || have == nil {
		return err
	}
	pool, err := p.readStoragePool(ctx, op)
	if err != nil {
		return err
	}
	if pool == nil || !pool.hasStorage(name) {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "storage %s is not in resource pool %s", name, p.storagePoolID())
	}
	err = p.delete(ctx, op, "/storage/"+url.PathEscape(name), nil)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil
	}
	return err
}

// storageStatus is GET /nodes/{node}/storage/{storage}/status.
type storageStatus struct {
	Active number `json:"active"`
	Total  number `json:"total"`
	Used   number `json:"used"`
	Avail  number `json:"avail"`
	Shared number `json:"shared"`
}

// StorageState implements hypervisor.Storager: one read of the definition and one status read
// per node it is on (the cluster's node list first when it names none). A node that cannot be
// asked counts as inactive.
func (p *Provider) StorageState(ctx context.Context, name string) (hypervisor.StorageState, error) {
	op := "get storage " + name
	have, err := p.readStorage(ctx, op, name)
	if err != nil {
		return hypervisor.StorageState{}, err
	}
	if have == nil {
		return hypervisor.StorageState{}, hypervisor.Errorf(hypervisor.ErrNotFound, op, "storage %s is not defined", name)
	}
	nodes := splitTags(have.Nodes)
	if len(nodes) == 0 {
		var rows []struct {
			Node string `json:"node"`
		}
		if err := p.get(ctx, op, "/nodes", &rows); err != nil {
			return hypervisor.StorageState{}, err
		}
		for _, r := range rows {
			nodes = append(nodes, r.Node)
		}
	}
	st := hypervisor.StorageState{Shared: have.Shared != 0}
	for _, node := range nodes {
		var s storageStatus
		err := p.get(ctx, op, "/nodes/"+url.PathEscape(node)+"/storage/"+url.PathEscape(name)+"/status", &s)
		if err != nil && !hypervisor.IsRetryable(err) {
			return hypervisor.StorageState{}, err
		}
		st.Nodes = append(st.Nodes, hypervisor.StorageNodeState{Node: node, Active: err == nil && s.Active != 0,
			TotalBytes: int64(s.Total), UsedBytes: int64(s.Used), AvailableBytes: int64(s.Avail)})
	}
	return st, nil
}
