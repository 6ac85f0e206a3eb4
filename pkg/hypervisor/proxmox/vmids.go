package proxmox

import (
	"context"
	"sync"
	"time"
)

// VMIDListingMaxAge is how old a listing of the cluster's VMs may be for NextID to propose
// a VMID from it: two sweeps at the default 30 s interval.
const VMIDListingMaxAge = time.Minute

// vmidInventory is the VMIDs the provider's last listing of the cluster's VMs showed (every
// GET /cluster/resources?type=vm it makes: the sweep's, template resolution's), with the VMIDs it
// proposed and cloned since. NextID proposes from it instead of listing every VM of the cluster
// once per VM: with a thousand VMs that listing is the largest answer PVE gives. A stale proposal
// is harmless: PVE refuses a clone onto a VMID that is taken, and the caller then reads whose VM
// holds it and proposes another.
type vmidInventory struct {
	mu     sync.Mutex
	at     time.Time
	listed map[int]bool
	// since are the VMIDs proposed or cloned after the listing: not in it, but taken or about
	// to be.
	since map[int]bool
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
	p.vmids.mu.Lock()
	p.vmids.at, p.vmids.listed, p.vmids.since = time.Now(), used, map[int]bool{}
	p.vmids.mu.Unlock()
	return rows, nil
}

// proposeFromListing picks the lowest VMID at or above minID that the recent listing and the
// proposals since leave free, and records it as proposed. ok is false when there is no listing
// younger than maxAge.
func (inv *vmidInventory) proposeFromListing(minID int, maxAge time.Duration) (int, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.listed == nil || time.Since(inv.at) > maxAge {
		return 0, false
	}
	id := max(minID, 100)
	for inv.listed[id] || inv.since[id] {
		id++
	}
	inv.since[id] = true
	return id, true
}

// taken records a VMID cloned or proposed after the listing.
func (inv *vmidInventory) taken(id int) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.since != nil {
		inv.since[id] = true
	}
}
