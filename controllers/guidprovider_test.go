package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// guidProvider is an in-memory provider shaped like Hyper-V: the hypervisor assigns each VM a GUID
// when it creates it, every operation is done when it returns, and ownership is not in tags. It
// exists only to exercise the controllers' paths for such providers; the real Hyper-V provider is
// tested against its own simulator. Proxmox behaviour is tested against the Proxmox simulator.
type guidProvider struct {
	mu        sync.Mutex
	templates []hypervisor.Template
	vms       map[string]*hypervisor.VM
	running   map[string]bool
	// loseCloneAnswers makes that many Clone calls create the VM and then fail, as when the
	// connection drops after the host created it or the manager restarts mid-call.
	loseCloneAnswers int
	// nextIDCalls and taskPolls count calls a provider without PreallocatedIDs or AsyncTasks
	// must never get.
	nextIDCalls, taskPolls int
}

func newGUIDProvider(templates ...hypervisor.Template) *guidProvider {
	return &guidProvider{templates: templates, vms: map[string]*hypervisor.VM{}, running: map[string]bool{}}
}

func newGUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Builder connects every HypervisorCluster of its kind to p, without reading Secrets.
func (p *guidProvider) Builder() connection.ProviderBuilder { return guidBuilder{p} }

type guidBuilder struct{ p *guidProvider }

func (b guidBuilder) Config(context.Context, connection.Source) (connection.Config, error) {
	return guidConfig(b), nil
}

type guidConfig struct{ p *guidProvider }

func (c guidConfig) Hash() string                        { return fmt.Sprintf("%p", c.p) }
func (c guidConfig) Build() (hypervisor.Provider, error) { return c.p, nil }

// VMs returns a copy of the VMs the provider holds.
func (p *guidProvider) VMs() []hypervisor.VM {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []hypervisor.VM
	for _, vm := range p.vms {
		out = append(out, p.view(vm))
	}
	return out
}

// Counts returns nextIDCalls and taskPolls.
func (p *guidProvider) Counts() (nextID, taskPolls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nextIDCalls, p.taskPolls
}

func (p *guidProvider) view(vm *hypervisor.VM) hypervisor.VM {
	v := *vm
	v.State = hypervisor.PowerStateStopped
	if p.running[vm.Ref.ID] {
		v.State = hypervisor.PowerStateRunning
	}
	return v
}

func (p *guidProvider) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{LinkedClones: true}
}

func (p *guidProvider) Verify(context.Context) (string, error) { return "10.0.20348", nil }

func (p *guidProvider) Nodes(context.Context) ([]hypervisor.Node, error) {
	return []hypervisor.Node{{Name: "hv1", Online: true, CPUs: 32, MemoryTotal: 128 << 30, MemoryFree: 100 << 30}}, nil
}

func (p *guidProvider) ResolveTemplate(ctx context.Context, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	ts, err := p.ResolveTemplates(ctx, sel)
	if err != nil {
		return hypervisor.Template{}, err
	}
	return ts[0], nil
}

func (p *guidProvider) ResolveTemplates(_ context.Context, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	var out []hypervisor.Template
	for _, t := range p.templates {
		if (sel.ID == "" || t.Ref.ID == sel.ID) && (sel.Name == "" || t.Name == sel.Name) && (sel.Node == "" || t.Ref.Node == sel.Node) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, "resolve template", "%s", sel)
	}
	return out, nil
}

func (p *guidProvider) NextID(context.Context, int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextIDCalls++
	return 0, hypervisor.Errorf(hypervisor.ErrUnsupported, "next ID", "the hypervisor assigns VM IDs")
}

func (p *guidProvider) Clone(_ context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if spec.Target.ID != "" {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, "clone", "the hypervisor assigns VM IDs")
	}
	for _, vm := range p.vms {
		if vm.Name == spec.Name {
			return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrAlreadyExists, "clone", "a VM named %s exists", spec.Name)
		}
	}
	owner := spec.Owner
	ref := hypervisor.VMRef{Node: spec.Target.Node, ID: newGUID()}
	p.vms[ref.ID] = &hypervisor.VM{Ref: ref, Name: spec.Name, Owner: &owner, Cores: 2, MemoryMiB: 1024}
	if p.loseCloneAnswers > 0 {
		p.loseCloneAnswers--
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrTransient, "clone", "connection reset after the VM was created")
	}
	return ref, "", nil
}

// owned returns the VM ref names when HyperFleet owns it.
func (p *guidProvider) owned(op string, ref hypervisor.VMRef) (*hypervisor.VM, error) {
	vm, ok := p.vms[ref.ID]
	if !ok {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "VM %s", ref)
	}
	if vm.Owner == nil {
		return nil, hypervisor.Errorf(hypervisor.ErrNotOwned, op, "VM %s", ref)
	}
	return vm, nil
}

func (p *guidProvider) Configure(_ context.Context, ref hypervisor.VMRef, spec hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	vm, err := p.owned("configure", ref)
	if err != nil {
		return "", err
	}
	if spec.Cores > 0 {
		vm.Cores = spec.Cores
	}
	if spec.MemoryMiB > 0 {
		vm.MemoryMiB = spec.MemoryMiB
	}
	vm.Tags = spec.Tags
	return "", nil
}

func (p *guidProvider) power(op string, ref hypervisor.VMRef, on bool) (hypervisor.TaskID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.owned(op, ref); err != nil {
		return "", err
	}
	p.running[ref.ID] = on
	return "", nil
}

func (p *guidProvider) Start(_ context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power("start", ref, true)
}
func (p *guidProvider) Stop(_ context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power("stop", ref, false)
}
func (p *guidProvider) Shutdown(_ context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power("shutdown", ref, false)
}
func (p *guidProvider) StopSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	return p.Stop(ctx, vm.Ref)
}
func (p *guidProvider) DeleteSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	return p.Delete(ctx, vm.Ref)
}
func (p *guidProvider) EjectCloudInit(context.Context, hypervisor.VMRef) error { return nil }

func (p *guidProvider) Delete(_ context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.owned("delete", ref); err != nil {
		return "", err
	}
	if p.running[ref.ID] {
		return "", hypervisor.Errorf(hypervisor.ErrBusy, "delete", "VM %s is running", ref)
	}
	delete(p.vms, ref.ID)
	return "", nil
}

func (p *guidProvider) VM(_ context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	vm, ok := p.vms[ref.ID]
	if !ok {
		return hypervisor.VM{}, hypervisor.Errorf(hypervisor.ErrNotFound, "read VM", "VM %s", ref)
	}
	return p.view(vm), nil
}

func (p *guidProvider) Addresses(_ context.Context, ref hypervisor.VMRef) ([]hypervisor.Address, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.vms[ref.ID]; !ok {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, "addresses", "VM %s", ref)
	}
	if !p.running[ref.ID] {
		return nil, nil
	}
	return []hypervisor.Address{{Type: hypervisor.AddressInternalIP, Address: "192.0.2.10"}}, nil
}

func (p *guidProvider) OwnedVMs(context.Context) ([]hypervisor.VM, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []hypervisor.VM
	for _, vm := range p.vms {
		if vm.Owner != nil {
			out = append(out, p.view(vm))
		}
	}
	return out, nil
}

func (p *guidProvider) Adopt(context.Context, hypervisor.VMRef, hypervisor.Ownership, string) error {
	return hypervisor.Errorf(hypervisor.ErrNotOwned, "adopt", "no legacy VMs here")
}

func (p *guidProvider) TaskStatus(_ context.Context, _ string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != "" {
		p.taskPolls++
		return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrNotFound, "task status", "no task %s", id)
	}
	return hypervisor.TaskState{Done: true}, nil
}
