package hyperv

import (
	"context"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// vmInput is the argument of the functions that act on one owned VM.
type vmInput struct {
	ID            string `json:"Id"`
	Expect        expectation
	Mode          string
	SeedDirectory string
	SeedPath      string
	// VHDDirectory, for Remove-HFVM, is where disks a call made but never attached (it was cut
	// short) are looked for, and the folders of the storages StorageIndex records.
	VHDDirectory string `json:",omitempty"`
	StorageIndex string `json:",omitempty"`
}

// act runs a module function on an owned VM; the module proves ownership on the host first.
func (p *Provider) act(ctx context.Context, verb, function string, ref hypervisor.VMRef, claimID, mode string) error {
	op := opName(verb, ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return err
	}
	in := vmInput{ID: ref.ID, Expect: p.expect(claimID), Mode: mode, SeedDirectory: p.cfg.SeedDirectory, SeedPath: p.seedPath(ref)}
	if function == fnRemoveVM {
		in.VHDDirectory, in.StorageIndex = p.cfg.VHDDirectory, p.cfg.StorageIndex
	}
	return h.call(ctx, op, function, in, nil)
}

// Start powers an owned VM on (Start-VM); done when the call returns.
func (p *Provider) Start(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return "", p.act(ctx, "start", fnStartVM, ref, "", "")
}

// Stop pulls an owned VM's power (Stop-VM -TurnOff).
func (p *Provider) Stop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return "", p.act(ctx, "stop", fnStopVM, ref, "", "TurnOff")
}

// Shutdown asks an owned VM's guest to shut down through the shutdown integration service and
// returns at once; the VM is off when the guest is done.
func (p *Provider) Shutdown(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return "", p.act(ctx, "shut down", fnStopVM, ref, "", "Shutdown")
}

// StopSeen stops a VM the caller has just read: the module still checks its Notes on the host,
// now for the very claim the read showed.
func (p *Provider) StopSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	if err := p.seenOwned("stop", vm); err != nil {
		return "", err
	}
	return "", p.act(ctx, "stop", fnStopVM, vm.Ref, vm.Owner.ClaimID, "TurnOff")
}

// DeleteSeen deletes a VM the caller has just read; see StopSeen.
func (p *Provider) DeleteSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	if err := p.seenOwned("delete", vm); err != nil {
		return "", err
	}
	return "", p.act(ctx, "delete", fnRemoveVM, vm.Ref, vm.Owner.ClaimID, "")
}

// seenOwned refuses a VM the read did not show as this HypervisorCluster's.
func (p *Provider) seenOwned(verb string, vm hypervisor.VM) error {
	if vm.Owner == nil || vm.Owner.Legacy || vm.Template || vm.Owner.Cluster != p.cfg.Cluster {
		return p.notOwned(opName(verb, vm.Ref), vm.Ref, vm.Name)
	}
	return nil
}

// Delete removes an owned VM that is off, with its differencing disk or full copy, its extra disks
// (on whatever storage they are) and its seed ISO; a running VM gets ErrBusy.
func (p *Provider) Delete(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	return "", p.act(ctx, "delete", fnRemoveVM, ref, "", "")
}

// EjectCloudInit ejects the VM's seed ISO from its DVD drive (Hyper-V allows that while the VM
// runs) and deletes the file, so the spent join token is gone from the VM and the host.
func (p *Provider) EjectCloudInit(ctx context.Context, ref hypervisor.VMRef) error {
	return p.act(ctx, "eject the seed of", fnDismountSeed, ref, "", "")
}
