package vsphere

import (
	"context"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Start implements hypervisor.Provider.
func (p *Provider) Start(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.vmTask(ctx, "Start", ref, func(ctx context.Context, vm *object.VirtualMachine, st types.VirtualMachinePowerState) (*object.Task, error) {
		if st == types.VirtualMachinePowerStatePoweredOn {
			return nil, nil
		}
		return vm.PowerOn(ctx)
	})
}

// Stop implements hypervisor.Provider: a hard power-off.
func (p *Provider) Stop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.vmTask(ctx, "Stop", ref, stop)
}

// StopSeen implements hypervisor.Provider.
func (p *Provider) StopSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	if vm.Owner == nil || vm.Owner.Legacy {
		return "", refused(hypervisor.ErrNotOwned, "Stop", "VM %s is not this HypervisorCluster's", vm.Ref.ID)
	}
	return p.Stop(ctx, vm.Ref)
}

func stop(ctx context.Context, vm *object.VirtualMachine, st types.VirtualMachinePowerState) (*object.Task, error) {
	if st == types.VirtualMachinePowerStatePoweredOff {
		return nil, nil
	}
	return vm.PowerOff(ctx)
}

// Shutdown implements hypervisor.Provider: VMware Tools asks the guest to power off; done when
// the call returns (the guest goes down on its own).
func (p *Provider) Shutdown(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.vmTask(ctx, "Shutdown", ref, func(ctx context.Context, vm *object.VirtualMachine, st types.VirtualMachinePowerState) (*object.Task, error) {
		if st != types.VirtualMachinePowerStatePoweredOn {
			return nil, nil
		}
		return nil, vm.ShutdownGuest(ctx)
	})
}

// Delete implements hypervisor.Provider: the VM with its disks (a linked clone's own child disks;
// the template's disks stay). A running VM is ErrBusy.
func (p *Provider) Delete(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.vmTask(ctx, "Delete", ref, destroy)
}

// DeleteSeen implements hypervisor.Provider.
func (p *Provider) DeleteSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	if vm.Owner == nil || vm.Owner.Legacy {
		return "", refused(hypervisor.ErrNotOwned, "Delete", "VM %s is not this HypervisorCluster's", vm.Ref.ID)
	}
	return p.Delete(ctx, vm.Ref)
}

func destroy(ctx context.Context, vm *object.VirtualMachine, st types.VirtualMachinePowerState) (*object.Task, error) {
	if st != types.VirtualMachinePowerStatePoweredOff {
		return nil, refused(hypervisor.ErrBusy, "Delete", "VM %s is %s; stop it first", vm.Reference().Value, st)
	}
	return vm.Destroy(ctx)
}

// vmTask runs one power or destroy operation on an owned VM; a nil task means nothing was to do.
func (p *Provider) vmTask(ctx context.Context, op string, ref hypervisor.VMRef,
	f func(context.Context, *object.VirtualMachine, types.VirtualMachinePowerState) (*object.Task, error)) (hypervisor.TaskID, error) {
	var tid hypervisor.TaskID
	err := p.do(ctx, op, func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, op, ref)
		if err != nil {
			return err
		}
		t, err := f(ctx, obj, vm.Runtime.PowerState)
		if err != nil || t == nil {
			return err
		}
		tid = taskID(t)
		return nil
	})
	return tid, err
}

// TaskStatus implements hypervisor.Provider: the vCenter task's state. vCenter forgets finished
// tasks after a while; a task it no longer knows is ErrNotFound.
func (p *Provider) TaskStatus(ctx context.Context, _ string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	if id == "" {
		return hypervisor.TaskState{Done: true}, nil
	}
	var st hypervisor.TaskState
	err := p.do(ctx, "TaskStatus", func(ctx context.Context, cn *conn) error {
		var t mo.Task
		ref := types.ManagedObjectReference{Type: "Task", Value: string(id)}
		if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, ref, []string{"info"}, &t); err != nil {
			return err
		}
		switch t.Info.State {
		case types.TaskInfoStateSuccess:
			st.Done = true
		case types.TaskInfoStateError:
			st.Done = true
			msg := "task failed"
			if t.Info.Error != nil {
				msg = t.Info.Error.LocalizedMessage
			}
			st.Err = refused(hypervisor.ErrTaskFailed, t.Info.DescriptionId, "%s", msg)
		default:
			if t.Info.Progress != 0 {
				progress := int(t.Info.Progress)
				st.Progress = &progress
			}
		}
		return nil
	})
	return st, err
}
