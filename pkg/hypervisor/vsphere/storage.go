package vsphere

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A StoragePool on vSphere is an existing datastore that HyperFleet adopts: making a datastore
// means formatting a LUN or mounting a share on every host, an administrator's work that
// HyperFleet does not do here. It reads the datastore's capacity and never changes or deletes it.

var _ hypervisor.Storager = (*Provider)(nil)

// datastoreType is the only StoragePool type on vSphere.
const datastoreType = "datastore"

// StorageGaps implements hypervisor.Storager.
func (p *Provider) StorageGaps(sp hypervisor.StoragePool) []hypervisor.StorageGap {
	var gaps []hypervisor.StorageGap
	if !sp.Adopt {
		gaps = append(gaps, hypervisor.StorageGap{Field: "spec.adopt", Reason: "HyperFleet adopts existing datastores on vSphere: set adopt and name the datastore in storageName"})
	}
	if sp.Type != "" && sp.Type != datastoreType {
		gaps = append(gaps, hypervisor.StorageGap{Field: "spec.type", Reason: "vSphere storage is a datastore: type " + datastoreType})
	}
	for _, f := range []struct{ field, value string }{{"spec.path", sp.Path}, {"spec.pool", sp.Pool}, {"spec.server", sp.Server}, {"spec.export", sp.Export}} {
		if f.value != "" {
			gaps = append(gaps, hypervisor.StorageGap{Field: f.field, Reason: "an adopted vSphere datastore is used as it is: HyperFleet does not define its backing"})
		}
	}
	if sp.Encrypted {
		gaps = append(gaps, hypervisor.StorageGap{Field: "spec.encrypted", Reason: "vSphere encrypts VMs, not datastores: VM encryption needs a key provider, not a datastore property"})
	}
	return gaps
}

// EnsureStorage implements hypervisor.Storager: an adopted datastore must exist in the datacenter
// and be mounted on the hosts sp.Nodes names; nothing is changed.
func (p *Provider) EnsureStorage(ctx context.Context, sp hypervisor.StoragePool) error {
	if gaps := p.StorageGaps(sp); len(gaps) > 0 {
		var reasons []string
		for _, g := range gaps {
			reasons = append(reasons, g.Field+": "+g.Reason)
		}
		return refused(hypervisor.ErrUnsupported, "EnsureStorage", "%s", strings.Join(reasons, "; "))
	}
	state, err := p.StorageState(ctx, sp.Name)
	if err != nil {
		return err
	}
	var missing []string
	for _, want := range sp.Nodes {
		if !slices.ContainsFunc(state.Nodes, func(n hypervisor.StorageNodeState) bool { return n.Node == want }) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return refused(hypervisor.ErrInvalid, "EnsureStorage", "datastore %s is not mounted on %s", sp.Name, strings.Join(missing, ", "))
	}
	return nil
}

// DeleteStorage implements hypervisor.Storager. HyperFleet makes no datastore on vSphere, so an
// existing one is never its to delete: ErrNotOwned; one that is gone is nil.
func (p *Provider) DeleteStorage(ctx context.Context, name string, _ hypervisor.Ownership) error {
	return p.do(ctx, "DeleteStorage", func(ctx context.Context, cn *conn) error {
		if _, err := findDatastore(ctx, cn, name); err != nil {
			if errors.Is(err, hypervisor.ErrNotFound) {
				return nil
			}
			return err
		}
		return refused(hypervisor.ErrNotOwned, "DeleteStorage", "datastore %s was adopted, not made, by HyperFleet: it is never deleted", name)
	})
}

// StorageState implements hypervisor.Storager: the datastore's capacity and free space (its
// summary, as vCenter last refreshed it) on each host of the compute cluster that mounts it,
// active when the host has it mounted and reachable.
func (p *Provider) StorageState(ctx context.Context, name string) (hypervisor.StorageState, error) {
	var out hypervisor.StorageState
	err := p.do(ctx, "StorageState", func(ctx context.Context, cn *conn) error {
		ds, err := findDatastore(ctx, cn, name)
		if err != nil {
			return err
		}
		var cluster mo.ClusterComputeResource
		if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
			return err
		}
		var mounts []types.ManagedObjectReference
		for _, m := range ds.Host {
			mounts = append(mounts, m.Key)
		}
		hosts, err := hostNames(ctx, cn, mounts...)
		if err != nil {
			return err
		}
		s := ds.Summary
		out.Shared = (s.MultipleHostAccess != nil && *s.MultipleHostAccess) || len(ds.Host) > 1
		for _, m := range ds.Host {
			if !slices.Contains(cluster.Host, m.Key) {
				continue
			}
			n := hypervisor.StorageNodeState{Node: hosts[m.Key],
				Active: s.Accessible && isTrue(m.MountInfo.Mounted, true) && isTrue(m.MountInfo.Accessible, false)}
			if n.Active {
				n.TotalBytes, n.AvailableBytes, n.UsedBytes = s.Capacity, s.FreeSpace, s.Capacity-s.FreeSpace
			}
			out.Nodes = append(out.Nodes, n)
		}
		sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Node < out.Nodes[j].Node })
		return nil
	})
	return out, err
}

// isTrue reads an optional flag; unset is def.
func isTrue(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// findDatastore reads the datastore of the datacenter named name; ErrNotFound when there is none.
func findDatastore(ctx context.Context, cn *conn, name string) (mo.Datastore, error) {
	v, err := cn.view(ctx, "Datastore")
	if err != nil {
		return mo.Datastore{}, err
	}
	var all []mo.Datastore
	if err := v.Retrieve(ctx, []string{"Datastore"}, []string{"name", "summary", "host"}, &all); err != nil {
		return mo.Datastore{}, err
	}
	for _, ds := range all {
		if ds.Name == name {
			return ds, nil
		}
	}
	return mo.Datastore{}, refused(hypervisor.ErrNotFound, "StorageState", "no datastore %q in the datacenter", name)
}
