package proxmox

import (
	"context"
	"sync"
	"time"
)

// VMIDListingMaxAge is how old a listing of the cluster's VMs may be for NextID to propose
// a VMID from it: two sweeps at the default 30 s interval.
const VMIDListingMaxAge = time.Minute

// VMIDProposalTTL is how long a proposed VMID that no listing shows yet stays reserved in the
// provider's memory: a claim may wait its turn to clone (spec.limits) for many minutes after its
// VMID was proposed, and a listing made meanwhile does not show the VMID taken.
const VMIDProposalTTL = 30 * time.Minute

// vmidInventory is the VMIDs the provider's last listing of the cluster's VMs showed (every
// GET /cluster/resources?type=vm it makes: the sweep's, template resolution's), with the VMIDs it
// proposed or cloned that no listing showed yet. NextID proposes from it instead of listing every
// VM of the cluster once per VM: with a thousand VMs that listing is the largest answer PVE gives.
// A stale proposal is harmless: PVE refuses a clone onto a VMID that is taken (or fails the clone
// task when the VMID is taken on another node), and the caller proposes another.
type vmidInventory struct {
	mu     sync.Mutex
	at     time.Time
	listed map[int]bool
	// proposed are the VMIDs proposed or cloned that no listing showed yet, with when: taken or
	// about to be. A new listing keeps them until it shows them or they are VMIDProposalTTL old,
	// so a claim still waiting to clone keeps its VMID to itself.
	proposed map[int]time.Time
}

// listVMs is GET /cluster/resources?type=vm, recorded in the VMID inventory.
func (p *Provider) listVMs(ctx context.Context, op string) ([]vmResource, error) {
	var rows []vmResource
	if err := p.get(ctx, op, "/cluster/resources?type=vm", &rows); err != nil {
		return nil, err
	}
	used := make(map[int]bool, len(rows))
	for _, r := range rows {
		used[int(r.VMID)] = true
	}
	now := time.Now()
	p.vmids.mu.Lock()
	p.vmids.at, p.vmids.listed = now, used
	for id, at := range p.vmids.proposed {
		if used[id] || now.Sub(at) > VMIDProposalTTL {
			delete(p.vmids.proposed, id)
		}
	}
	p.vmids.mu.Unlock()
	return rows, nil
}

// proposeFromListing picks the lowest VMID at or above minID that the recent listing and the
// proposals not listed yet leave free, and records it as proposed. ok is false when there is no listing
// younger than maxAge.
func (inv *vmidInventory) proposeFromListing(minID int, maxAge time.Duration) (int, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.listed == nil || time.Since(inv.at) > maxAge {
		return 0, false
	}
	id := max(minID, 100)
	for {
		if _, proposed := inv.proposed[id]; !inv.listed[id] && !proposed {
			break
		}
		id++
	}
	inv.record(id)
	return id, true
}

// taken records a VMID cloned or proposed.
func (inv *vmidInventory) taken(id int) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.record(id)
}

func (inv *vmidInventory) record(id int) {
	if inv.proposed == nil {
		inv.proposed = map[int]time.Time{}
	}
	inv.proposed[id] = time.Now()
}
