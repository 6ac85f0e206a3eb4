package vsphere

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Clone implements hypervisor.Provider. The new VM's instance UUID is chosen here and set by the
// clone, with HyperFleet's marks in its ExtraConfig, so the VM is known (and owned) from the
// moment vCenter creates it; the returned TaskID is the clone task. The clone is linked (a child
// disk of the template's current snapshot) unless spec.Full is set or the template has no
// snapshot; a full clone goes to the configured datastore, if any. The VM is created powered off
// on spec.Target.Node.
func (p *Provider) Clone(ctx context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	id := uuid.NewString()
	var ref hypervisor.VMRef
	var tid hypervisor.TaskID
	err := p.do(ctx, "Clone", func(ctx context.Context, cn *conn) error {
		src, tmpl, err := p.find(ctx, cn, spec.Source.ID)
		if err != nil {
			return err
		}
		if tmpl.Config == nil || !tmpl.Config.Template {
			return refused(hypervisor.ErrInvalid, "Clone", "%s (%s) is not a vSphere template", spec.Source.ID, tmpl.Name)
		}
		host, err := p.host(ctx, cn, spec.Target.Node)
		if err != nil {
			return err
		}
		pool := cn.pool.Reference()
		relocate := types.VirtualMachineRelocateSpec{Pool: &pool, Host: host}
		cs := types.VirtualMachineCloneSpec{
			Location: relocate,
			Config: &types.VirtualMachineConfigSpec{
				InstanceUuid: id,
				Annotation:   "HyperFleet VM of MachineClaim " + spec.Owner.Claim() + ". HyperFleet deletes it when its claim goes away.",
				ExtraConfig:  p.ownerMarks(spec.Owner),
			},
		}
		if tmpl.Snapshot != nil && tmpl.Snapshot.CurrentSnapshot != nil && !spec.Full {
			cs.Snapshot = tmpl.Snapshot.CurrentSnapshot
			cs.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
		} else if cn.datastore != nil {
			ds := cn.datastore.Reference()
			cs.Location.Datastore = &ds
		}
		t, err := src.Clone(ctx, cn.folder, spec.Name, cs)
		if err != nil {
			return err
		}
		ref, tid = hypervisor.VMRef{Node: spec.Target.Node, ID: id}, taskID(t)
		return nil
	})
	return ref, tid, err
}

// host finds a host of the compute cluster by name.
func (p *Provider) host(ctx context.Context, cn *conn, name string) (*types.ManagedObjectReference, error) {
	var cluster mo.ClusterComputeResource
	if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
		return nil, err
	}
	var hosts []mo.HostSystem
	if len(cluster.Host) > 0 {
		if err := property.DefaultCollector(cn.c).Retrieve(ctx, cluster.Host, []string{"name"}, &hosts); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, h := range hosts {
		if h.Name == name {
			r := h.Reference()
			return &r, nil
		}
		names = append(names, h.Name)
	}
	return nil, refused(hypervisor.ErrNotFound, "Clone", "no host %q in the compute cluster (hosts: %s)", name, strings.Join(names, ", "))
}
