package vsphere

import (
	"context"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var _ hypervisor.Snapshotter = (*Provider)(nil)

// Snapshots implements hypervisor.Snapshotter: the VM's snapshot tree, parents before children.
func (p *Provider) Snapshots(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Snapshot, error) {
	var out []hypervisor.Snapshot
	err := p.do(ctx, "Snapshots", func(ctx context.Context, cn *conn) error {
		_, vm, err := p.owned(ctx, cn, "Snapshots", ref)
		if err != nil {
			return err
		}
		out = flatten(vm)
		return nil
	})
	return out, err
}

// flatten lists a VM's snapshot tree, each parent before its children.
func flatten(vm mo.VirtualMachine) []hypervisor.Snapshot {
	if vm.Snapshot == nil {
		return nil
	}
	var out []hypervisor.Snapshot
	var walk func(parent string, list []types.VirtualMachineSnapshotTree)
	walk = func(parent string, list []types.VirtualMachineSnapshotTree) {
		for _, s := range list {
			out = append(out, hypervisor.Snapshot{Name: s.Name, Description: s.Description, Parent: parent, Time: s.CreateTime,
				WithMemory: s.State == types.VirtualMachinePowerStatePoweredOn})
			walk(s.Name, s.ChildSnapshotList)
		}
	}
	walk("", vm.Snapshot.RootSnapshotList)
	return out
}

// snapshotRef finds the snapshot named name in a VM's tree.
func snapshotRef(vm mo.VirtualMachine, name string) *types.ManagedObjectReference {
	if vm.Snapshot == nil {
		return nil
	}
	var find func(list []types.VirtualMachineSnapshotTree) *types.ManagedObjectReference
	find = func(list []types.VirtualMachineSnapshotTree) *types.ManagedObjectReference {
		for _, s := range list {
			if s.Name == name {
				r := s.Snapshot
				return &r
			}
			if r := find(s.ChildSnapshotList); r != nil {
				return r
			}
		}
		return nil
	}
	return find(vm.Snapshot.RootSnapshotList)
}

// CreateSnapshot implements hypervisor.Snapshotter. vSphere allows two snapshots of one name;
// HyperFleet does not, so a name in use is refused. Memory is saved only for a running VM.
func (p *Provider) CreateSnapshot(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.SnapshotSpec) (hypervisor.TaskID, error) {
	var tid hypervisor.TaskID
	err := p.do(ctx, "CreateSnapshot", func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, "CreateSnapshot", ref)
		if err != nil {
			return err
		}
		if snapshotRef(vm, spec.Name) != nil {
			return refused(hypervisor.ErrInvalid, "CreateSnapshot", "VM %s already has a snapshot %q", ref.ID, spec.Name)
		}
		memory := spec.WithMemory && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
		t, err := obj.CreateSnapshot(ctx, spec.Name, spec.Description, memory, false)
		if err != nil {
			return err
		}
		tid = taskID(t)
		return nil
	})
	return tid, err
}

// DeleteSnapshot implements hypervisor.Snapshotter: the snapshot alone, its children kept (their
// disks are consolidated by vSphere).
func (p *Provider) DeleteSnapshot(ctx context.Context, ref hypervisor.VMRef, name string) (hypervisor.TaskID, error) {
	return p.snapshotTask(ctx, "DeleteSnapshot", ref, name, func(ctx context.Context, cn *conn, s types.ManagedObjectReference) (types.ManagedObjectReference, error) {
		res, err := methods.RemoveSnapshot_Task(ctx, cn.c, &types.RemoveSnapshot_Task{This: s, RemoveChildren: false, Consolidate: types.NewBool(true)})
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		return res.Returnval, nil
	})
}

// RollbackSnapshot implements hypervisor.Snapshotter. A snapshot without memory leaves the VM
// powered off; start powers it on once the revert is done (vSphere's suppressPowerOn is false
// only for snapshots with memory, which resume by themselves).
func (p *Provider) RollbackSnapshot(ctx context.Context, ref hypervisor.VMRef, name string, start bool) (hypervisor.TaskID, error) {
	return p.snapshotTask(ctx, "RollbackSnapshot", ref, name, func(ctx context.Context, cn *conn, s types.ManagedObjectReference) (types.ManagedObjectReference, error) {
		res, err := methods.RevertToSnapshot_Task(ctx, cn.c, &types.RevertToSnapshot_Task{This: s, SuppressPowerOn: types.NewBool(!start)})
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		return res.Returnval, nil
	})
}

func (p *Provider) snapshotTask(ctx context.Context, op string, ref hypervisor.VMRef, name string,
	f func(context.Context, *conn, types.ManagedObjectReference) (types.ManagedObjectReference, error)) (hypervisor.TaskID, error) {
	var tid hypervisor.TaskID
	err := p.do(ctx, op, func(ctx context.Context, cn *conn) error {
		_, vm, err := p.owned(ctx, cn, op, ref)
		if err != nil {
			return err
		}
		r := snapshotRef(vm, name)
		if r == nil {
			return refused(hypervisor.ErrNotFound, op, "VM %s has no snapshot %q", ref.ID, name)
		}
		t, err := f(ctx, cn, *r)
		if err != nil {
			return err
		}
		tid = hypervisor.TaskID(t.Value)
		return nil
	})
	return tid, err
}
