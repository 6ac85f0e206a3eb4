package hyperv

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Storages on Hyper-V are folders ("directory"): Path, an absolute path on a host volume (a local
// disk or a cluster shared volume under C:\ClusterStorage, which every node sees), whose last
// element is the storage's Name. A folder HyperFleet creates carries its mark in a file inside it,
// .hyperfleet-owner (a ```hyperfleet-storage block); an adopted folder is only checked to exist
// and is never written to. Each host keeps HyperFleet's record of the storage in the storage index
// (Config.StorageIndex), a file named by the owner's mark and the storage's name, so the folder is
// found again by name. A storage's capacity is its volume's (Get-Volume). A full clone's copy of
// the template's disk and a VM's extra disks go into the folder of the storage they name (Clone,
// Configure), and go with the VM when it is deleted.

// Module functions of storages.
const (
	fnSetStorage    = "Set-HFStorage"
	fnRemoveStorage = "Remove-HFStorage"
	fnGetStorage    = "Get-HFStorage"
)

const (
	storageType       = "directory"
	storageBlockStart = "```hyperfleet-storage"
	clusterStorage    = `C:\ClusterStorage\`
)

// storageNameRe is a storage name: it names the folder and the index file.
var storageNameRe = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,61}[a-z0-9]$`)

// storageInput is the argument of Set-HFStorage, Remove-HFStorage and Get-HFStorage.
type storageInput struct {
	IndexPath string
	Owner     resourceOwner `json:",omitempty"`
	Path      string        `json:",omitempty"`
	Adopt     bool          `json:",omitempty"`
	// Marker is the content of the folder's .hyperfleet-owner file.
	Marker string `json:",omitempty"`
}

// wireStorage is Get-HFStorage's answer.
type wireStorage struct {
	Defined        bool
	Path           string
	Adopted        bool
	Active         bool
	SizeBytes      int64
	RemainingBytes int64
}

// StorageGaps lists what a Hyper-V folder storage cannot give.
func (p *Provider) StorageGaps(sp hypervisor.StoragePool) []hypervisor.StorageGap {
	var gaps []hypervisor.StorageGap
	gap := func(field, format string, args ...any) {
		gaps = append(gaps, hypervisor.StorageGap{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if sp.Type != storageType {
		gap("spec.type", "Hyper-V storages are folders on a host volume: type %q is not %q", sp.Type, storageType)
	}
	if !storageNameRe.MatchString(sp.Name) {
		gap("spec.storageName", "%q cannot name a Hyper-V storage folder: use lower-case letters, digits, '-', '_' and '.'", sp.Name)
	}
	switch err := checkWindowsPath("path", sp.Path); {
	case sp.Path == "":
		gap("spec.path", "a Hyper-V storage is a folder: its absolute path is required")
	case err != nil:
		gap("spec.path", "%v", err)
	case strings.HasPrefix(sp.Path, `\\`):
		gap("spec.path", "%s is an SMB share: HyperFleet reads a storage's capacity from the host volume it is on (Get-Volume); use a local or cluster shared volume", sp.Path)
	case !strings.EqualFold(lastElement(sp.Path), sp.Name):
		gap("spec.storageName", "the storage's name %q is not its folder's last element %q", sp.Name, lastElement(sp.Path))
	}
	if sp.Pool != "" || sp.Server != "" || sp.Export != "" {
		gap("spec", "pool, server and export are not a folder's: leave them unset")
	}
	for _, c := range sp.Content {
		if c != "images" {
			gap("spec.content", "a Hyper-V folder holds VM disks (images) only, not %q", c)
		}
	}
	if sp.Encrypted {
		gap("spec.encrypted", "Hyper-V has no per-folder encryption through this API: BitLocker encrypts whole volumes; adopt a folder on an encrypted volume")
	}
	for _, n := range sp.Nodes {
		if p.hosts[n] == nil {
			gap("spec.nodes", "%q is not one of this cluster's hosts %v", n, p.names)
		}
	}
	return gaps
}

func lastElement(path string) string {
	path = strings.TrimRight(path, `\`)
	return path[strings.LastIndex(path, `\`)+1:]
}

// indexPath is the host's record of the storage name for this provider's owner mark. The module's
// Get-HFStorageFolder builds the same path to find the folder a VM's disk goes to.
func (p *Provider) indexPath(tag, name string) string {
	return p.cfg.StorageIndex + `\` + tag + "." + name + ".json"
}

// storageHosts are the hosts of a storage's nodes (all for none).
func (p *Provider) storageHosts(nodes []string) []string {
	if len(nodes) == 0 {
		return p.names
	}
	out := slices.Clone(nodes)
	slices.Sort(out)
	return slices.Compact(out)
}

// onHosts runs fn on each of names at once.
func onHosts[T any](p *Provider, names []string, fn func(*host) (T, error)) ([]T, []error) {
	out := make([]T, len(names))
	errs := make([]error, len(names))
	for i, n := range names {
		r, e := eachHost(p, n, fn)
		out[i], errs[i] = r[0], e[0]
	}
	return out, errs
}

// EnsureStorage creates the folder, marked, on each of the storage's hosts, or for Adopt checks
// it exists there, and records it in each host's storage index. A folder of that path without
// this installation's mark is refused with ErrNotOwned unless adopted.
func (p *Provider) EnsureStorage(ctx context.Context, sp hypervisor.StoragePool) error {
	op := "ensure storage " + sp.Name
	if gaps := p.StorageGaps(sp); len(gaps) > 0 {
		reasons := make([]string, len(gaps))
		for i, g := range gaps {
			reasons[i] = g.Field + ": " + g.Reason
		}
		return hypervisor.Errorf(hypervisor.ErrUnsupported, op, "%s", strings.Join(reasons, "; "))
	}
	o := p.resourceOwner(sp.Owner, sp.Name)
	path := strings.TrimRight(sp.Path, `\`)
	in := storageInput{IndexPath: p.indexPath(o.OwnerTag, sp.Name), Owner: o, Path: path, Adopt: sp.Adopt}
	if !sp.Adopt {
		in.Marker = resourceMark(storageBlockStart, "HyperFleet storage "+sp.Name+". HyperFleet removes this folder when its VMStorage goes away and the folder holds nothing else.", o)
	}
	_, errs := onHosts(p, p.storageHosts(sp.Nodes), func(h *host) (struct{}, error) {
		return struct{}{}, h.call(ctx, op, fnSetStorage, in, nil)
	})
	return errors.Join(errs...)
}

// DeleteStorage forgets the storage on every host and removes the folders HyperFleet created,
// only when nothing but their mark is left in them (ErrBusy otherwise: data is never deleted);
// an adopted folder stays as it is. A folder whose mark is not this installation's: ErrNotOwned.
func (p *Provider) DeleteStorage(ctx context.Context, name string, owner hypervisor.Ownership) error {
	op := "delete storage " + name
	if !storageNameRe.MatchString(name) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%q is not a storage name", name)
	}
	o := p.resourceOwner(owner, name)
	in := storageInput{IndexPath: p.indexPath(o.OwnerTag, name), Owner: o}
	_, errs := eachHost(p, "", func(h *host) (struct{}, error) {
		return struct{}{}, h.call(ctx, op, fnRemoveStorage, in, nil)
	})
	return errors.Join(errs...)
}

// StorageState reads the storage's volume on each host that records it; a host that does not
// answer, or whose folder is gone, is inactive. ErrNotFound when no host records it. A folder on a
// cluster shared volume is one pool seen from every node (Shared).
func (p *Provider) StorageState(ctx context.Context, name string) (hypervisor.StorageState, error) {
	op := "read storage " + name
	if !storageNameRe.MatchString(name) {
		return hypervisor.StorageState{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "%q is not a storage name", name)
	}
	in := storageInput{IndexPath: p.indexPath(p.ownerTag, name)}
	outs, errs := eachHost(p, "", func(h *host) (wireStorage, error) {
		var w wireStorage
		err := h.call(ctx, op, fnGetStorage, in, &w)
		return w, err
	})
	var st hypervisor.StorageState
	var unreachable []string
	for i, n := range p.names {
		w := outs[i]
		switch {
		case errs[i] != nil:
			unreachable = append(unreachable, n)
			continue
		case !w.Defined:
			continue
		}
		st.Shared = st.Shared || strings.HasPrefix(strings.ToLower(w.Path), strings.ToLower(clusterStorage))
		ns := hypervisor.StorageNodeState{Node: n, Active: w.Active}
		if w.Active {
			ns.TotalBytes, ns.AvailableBytes, ns.UsedBytes = w.SizeBytes, w.RemainingBytes, w.SizeBytes-w.RemainingBytes
		}
		st.Nodes = append(st.Nodes, ns)
	}
	if len(st.Nodes) == 0 {
		if len(unreachable) > 0 {
			return st, errors.Join(errs...)
		}
		return st, hypervisor.Errorf(hypervisor.ErrNotFound, op, "no host of %v records storage %s", p.names, name)
	}
	for _, n := range unreachable {
		st.Nodes = append(st.Nodes, hypervisor.StorageNodeState{Node: n})
	}
	return st, nil
}

var _ hypervisor.Storager = (*Provider)(nil)
