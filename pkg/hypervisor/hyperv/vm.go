package hyperv

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// powerState maps Hyper-V's VMState to HyperFleet's.
func powerState(s VMState) hypervisor.PowerState {
	switch {
	case s == VMStateRunning, s == VMStateStopping, s == VMStateReset, s == VMStateForceReboot,
		s == VMStateSaving, s == VMStatePausing, s == VMStateFastSaving:
		return hypervisor.PowerStateRunning
	case s == VMStateOff, s == VMStateSaved, s == VMStateFastSaved, s == VMStateForceOff:
		return hypervisor.PowerStateStopped
	case s == VMStatePaused, s == VMStateResuming:
		return hypervisor.PowerStatePaused
	case s == VMStateStarting:
		return hypervisor.PowerStateRunning
	case s >= vmStateCriticalLow && s <= vmStateCriticalHigh:
		return hypervisor.PowerStateUnknown
	default:
		return hypervisor.PowerStateUnknown
	}
}

// toVM converts the module's description of a VM on node.
func (p *Provider) toVM(node string, w wireVM) hypervisor.VM {
	vm := hypervisor.VM{
		Ref:       hypervisor.VMRef{Node: node, ID: lowerGUID(w.ID)},
		Name:      w.Name,
		State:     powerState(w.State),
		Template:  isTemplateNotes(w.Notes),
		Tags:      notesTags(w.Notes),
		Cores:     w.ProcessorCount,
		MemoryMiB: int(w.MemoryStartupBytes >> 20),
		Owner:     p.ownerFromNotes(w.Notes),
	}
	switch {
	case w.Migrating:
		// The module refuses changes while the VM moves, as PVE does for its lock.
		vm.Lock = "migrate"
	case w.Merging:
		// Checkpoints, moves and deletion wait for the merge, as for a Proxmox lock.
		vm.Lock = "merge"
	}
	if vm.State == hypervisor.PowerStateRunning {
		vm.Uptime = time.Duration(w.UptimeSeconds) * time.Second
	}
	return vm
}

// getVM reads one VM.
func (h *host) getVM(ctx context.Context, op, id string) (wireVM, error) {
	var out wireOneVM
	err := h.call(ctx, op, fnVM, struct{ Id string }{id}, &out)
	return out.VM, err
}

// VM returns a VM's current state; ErrNotFound when it does not exist.
func (p *Provider) VM(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	op := opName("read", ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return hypervisor.VM{}, err
	}
	w, err := h.getVM(ctx, op, ref.ID)
	if err != nil {
		return hypervisor.VM{}, err
	}
	return p.toVM(h.name, w), nil
}

// Addresses returns the guest's addresses as the data exchange (KVP) integration service reports
// them; empty until the guest's KVP daemon runs. Link-local addresses are left out.
func (p *Provider) Addresses(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Address, error) {
	op := opName("read addresses of", ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return nil, err
	}
	w, err := h.getVM(ctx, op, ref.ID)
	if err != nil {
		return nil, err
	}
	return guestAddresses(w), nil
}

func guestAddresses(w wireVM) []hypervisor.Address {
	var v4, v6 []hypervisor.Address
	for _, s := range w.IPAddresses {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil || ip.IsLinkLocalUnicast() || ip.IsLoopback() || ip.IsUnspecified() {
			continue
		}
		a := hypervisor.Address{Type: hypervisor.AddressInternalIP, Address: ip.String()}
		if ip.To4() != nil {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	out := append(v4, v6...)
	if len(out) > 0 && w.Name != "" {
		out = append(out, hypervisor.Address{Type: hypervisor.AddressHostname, Address: w.Name})
	}
	return out
}

// OwnedVMs lists this HypervisorCluster's VMs on every host, one inventory call per host. A host
// that does not answer fails the listing: a partial list would look like VMs gone. Hyper-V VMs
// are never Legacy (no release before installation identities managed Hyper-V).
func (p *Provider) OwnedVMs(ctx context.Context) ([]hypervisor.VM, error) {
	invs, errs := eachHost(p, "", func(h *host) (wireInventory, error) { return h.inventory(ctx, "list owned VMs") })
	var out []hypervisor.VM
	for i, n := range p.names {
		if errs[i] != nil {
			return nil, errs[i]
		}
		for _, w := range invs[i].VMs {
			if vm := p.toVM(n, w); vm.Owned() {
				out = append(out, vm)
			}
		}
	}
	return out, nil
}

// Adopt leaves a VM already marked for owner as it is; there are no Legacy Hyper-V VMs, so any
// other VM gets ErrNotOwned.
func (p *Provider) Adopt(ctx context.Context, ref hypervisor.VMRef, owner hypervisor.Ownership, _ string) error {
	op := opName("adopt", ref)
	vm, err := p.VM(ctx, ref)
	if err != nil {
		return err
	}
	if vm.Owner == nil || vm.Owner.ClaimID != owner.ClaimID || vm.Owner.Claim() != owner.Claim() {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "VM %s (%q) is not marked for claim %s", ref, vm.Name, owner.Claim())
	}
	return nil
}
