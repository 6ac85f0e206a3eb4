package proxmox

import (
	"context"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Start powers an owned VM on. A VM that already runs is not an error: the TaskID is empty when a
// read showed it running, and otherwise the start task reports success.
func (p *Provider) Start(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power(ctx, ref, "start", "already running")
}

// Stop powers an owned VM off at once. A stopped VM is not an error: the TaskID is empty.
func (p *Provider) Stop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power(ctx, ref, "stop", "not running")
}

// Shutdown asks the guest of an owned VM to power off (ACPI). A stopped VM is not an error.
func (p *Provider) Shutdown(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return p.power(ctx, ref, "shutdown", "not running")
}

// StopSeen stops vm, which a VM read of the caller's operation just returned, without reading it
// again.
func (p *Provider) StopSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	op := opName("stop", vm.Ref)
	owned, err := p.seenOwned(op, vm)
	if err != nil {
		return "", err
	}
	return p.powerOwned(ctx, op, vm.Ref, owned, "stop", "not running")
}

// power posts a status change. done is PVE's wording when the VM is already in the wanted state.
func (p *Provider) power(ctx context.Context, ref hypervisor.VMRef, action, done string) (hypervisor.TaskID, error) {
	op := opName(action, ref)
	vm, err := p.ensureOwned(ctx, op, ref)
	if err != nil {
		return "", err
	}
	return p.powerOwned(ctx, op, ref, vm, action, done)
}

func (p *Provider) powerOwned(ctx context.Context, op string, ref hypervisor.VMRef, vm ownedVM, action, done string) (hypervisor.TaskID, error) {
	if f := vm.facts; (action == "start" && f.state == hypervisor.PowerStateRunning) ||
		(action != "start" && f.state == hypervisor.PowerStateStopped) {
		return "", nil
	}
	if err := p.ensureTagged(ctx, op, ref, vm); err != nil {
		return "", err
	}
	var id string
	if err := p.post(ctx, op, vmPath(ref, "/status/"+action), nil, &id); err != nil {
		if strings.Contains(errorText(err), done) {
			return "", nil
		}
		return "", err
	}
	return hypervisor.TaskID(id), nil
}
