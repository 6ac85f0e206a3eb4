package proxmox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Delete destroys an owned VM with its disks and its cloud-init ISO and returns the destroy task.
// A running VM is stopped first and the stop task awaited: destroying right after posting a stop
// fails with "VM is running" and leaves an orphan, the bug CAPMOX had. The ISO goes first, so a
// retried Delete never leaves it behind once the VM is gone.
func (p *Provider) Delete(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	op := opName("delete", ref)
	vm, err := p.ensureOwned(ctx, op, ref)
	if err != nil {
		return "", err
	}
	return p.deleteOwned(ctx, op, ref, vm)
}

// DeleteSeen deletes vm, which a VM read of the caller's operation just returned, without reading
// it again.
func (p *Provider) DeleteSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	op := opName("delete", vm.Ref)
	owned, err := p.seenOwned(op, vm)
	if err != nil {
		return "", err
	}
	return p.deleteOwned(ctx, op, vm.Ref, owned)
}

func (p *Provider) deleteOwned(ctx context.Context, op string, ref hypervisor.VMRef, vm ownedVM) (hypervisor.TaskID, error) {
	if err := p.deleteISO(ctx, op, ref); err != nil {
		return "", err
	}
	if vm.facts.state != hypervisor.PowerStateStopped {
		if err := p.stopAndWait(ctx, op, ref); err != nil {
			return "", err
		}
	}
	id, err := p.destroy(ctx, op, ref)
	if err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}

func (p *Provider) destroy(ctx context.Context, op string, ref hypervisor.VMRef) (string, error) {
	var id string
	err := p.delete(ctx, op, vmPath(ref, "?purge=1&destroy-unreferenced-disks=1"), &id)
	return id, err
}

func (p *Provider) stopAndWait(ctx context.Context, op string, ref hypervisor.VMRef) error {
	var id string
	if err := p.post(ctx, op, vmPath(ref, "/status/stop"), nil, &id); err != nil {
		if strings.Contains(errorText(err), "not running") {
			return nil
		}
		return err
	}
	return p.waitTask(ctx, op, id)
}

// deleteISO removes the VM's cloud-init ISO; one that was never uploaded is fine.
func (p *Provider) deleteISO(ctx context.Context, op string, ref hypervisor.VMRef) error {
	_, err := p.startDeleteISO(ctx, op, ref)
	return err
}

// startDeleteISO starts removing the ISO and returns the removal task, empty when there was none.
func (p *Provider) startDeleteISO(ctx context.Context, op string, ref hypervisor.VMRef) (string, error) {
	volid := p.isoVolume(ref)
	var id string
	err := p.delete(ctx, op, fmt.Sprintf("/nodes/%s/storage/%s/content/%s", ref.Node, p.cfg.ISOStorage, volid), &id)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return "", nil
	}
	return id, err
}
