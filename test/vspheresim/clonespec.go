package vspheresim

import (
	"slices"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// vcsim (govmomi v0.52.0) builds a clone's configuration from the source VM alone: the clone
// spec's ConfigSpec (the new VM's instance UUID, ExtraConfig, annotation) is copied into a copy of
// that configuration and lost, where vCenter applies it to the new VM. HyperFleet sets its
// ownership marks and the VM's ID that way, atomically with the clone, so the simulator carries
// the spec from the clone source to the folder that creates the VM and applies it there, as
// vCenter does.

// pendingClones are the ConfigSpecs of clones under way, by the new VM's name.
type pendingClones struct {
	mu    sync.Mutex
	specs map[string]*types.VirtualMachineConfigSpec
}

func (p *pendingClones) put(name string, spec *types.VirtualMachineConfigSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.specs[name] = spec
}

func (p *pendingClones) take(name string) *types.VirtualMachineConfigSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	spec := p.specs[name]
	delete(p.specs, name)
	return spec
}

// cloneSource is a VM or template whose clones keep the clone spec's configuration.
type cloneSource struct {
	*simulator.VirtualMachine
	pending *pendingClones
}

func (vm *cloneSource) CloneVMTask(ctx *simulator.Context, req *types.CloneVM_Task) soap.HasFault {
	if req.Spec.Config != nil {
		vm.pending.put(req.Name, req.Spec.Config)
	}
	return vm.VirtualMachine.CloneVMTask(ctx, req)
}

// vmFolder creates a clone's VM with its clone spec's configuration.
type vmFolder struct {
	*simulator.Folder
	pending *pendingClones
}

func (f *vmFolder) CreateVMTask(ctx *simulator.Context, req *types.CreateVM_Task) soap.HasFault {
	if spec := f.pending.take(req.Config.Name); spec != nil {
		if spec.InstanceUuid != "" {
			req.Config.InstanceUuid = spec.InstanceUuid
		}
		if spec.Annotation != "" {
			req.Config.Annotation = spec.Annotation
		}
		req.Config.ExtraConfig = append(req.Config.ExtraConfig, spec.ExtraConfig...)
	}
	return f.Folder.CreateVMTask(ctx, req)
}

// applyCloneSpecs wraps every VM and every VM folder of the inventory.
func (s *Simulator) applyCloneSpecs() {
	ctx := s.model.Service.Context
	pending := &pendingClones{specs: map[string]*types.VirtualMachineConfigSpec{}}
	for _, e := range ctx.Map.All("VirtualMachine") {
		if vm, ok := e.(*simulator.VirtualMachine); ok {
			ctx.Map.Put(&cloneSource{VirtualMachine: vm, pending: pending})
		}
	}
	for _, e := range ctx.Map.All("Folder") {
		if f, ok := e.(*simulator.Folder); ok && slices.Contains(f.ChildType, "VirtualMachine") {
			ctx.Map.Put(&vmFolder{Folder: f, pending: pending})
		}
	}
}
