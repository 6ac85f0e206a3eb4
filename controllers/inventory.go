package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/sharedcall"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// nodeListingMaxAge is how old a HypervisorCluster's node listing may be for placement to use it:
// two health checks at the default 30 s interval.
const nodeListingMaxAge = time.Minute

// nodeInventory shares each HypervisorCluster's last node listing (hosts, online, free memory)
// between its health check, which lists the nodes every interval, and the placement of its runner
// VMs, which listed them once per VM. Memory only, keyed by the provider instance, so a
// HypervisorCluster whose settings change lists afresh. Free memory a listing does not show yet is
// counted by placement itself: claims with a host but no running VM, and claims started since the
// listing.
type nodeInventory struct {
	mu      sync.Mutex
	entries map[hypervisor.Provider]nodeListing
	// reads shares a listing under way among the claims that found none fresh meanwhile.
	reads sharedcall.Group[hypervisor.Provider, nodeListing]
}

type nodeListing struct {
	nodes []hypervisor.Node
	at    time.Time
}

// put records a listing made at at.
func (inv *nodeInventory) put(p hypervisor.Provider, nodes []hypervisor.Node, at time.Time) {
	if inv == nil {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.entries == nil {
		inv.entries = map[hypervisor.Provider]nodeListing{}
	}
	for k, e := range inv.entries { // providers replaced since do not linger
		if time.Since(e.at) > nodeListingMaxAge {
			delete(inv.entries, k)
		}
	}
	inv.entries[p] = nodeListing{nodes: nodes, at: at}
}

// nodes returns p's nodes from a listing younger than nodeListingMaxAge, or lists them now; and
// when the listing was made.
func (inv *nodeInventory) nodes(ctx context.Context, p hypervisor.Provider) ([]hypervisor.Node, time.Time, error) {
	if inv != nil {
		inv.mu.Lock()
		e, ok := inv.entries[p]
		inv.mu.Unlock()
		if ok && time.Since(e.at) <= nodeListingMaxAge {
			return e.nodes, e.at, nil
		}
	}
	list := func() (nodeListing, error) {
		at := time.Now()
		nodes, err := p.Nodes(ctx)
		if err != nil {
			return nodeListing{}, err
		}
		inv.put(p, nodes, at)
		return nodeListing{nodes: nodes, at: at}, nil
	}
	var (
		l   nodeListing
		err error
	)
	if inv == nil {
		l, err = list()
	} else {
		l, err = inv.reads.Do(ctx, p, list)
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	return l.nodes, l.at, nil
}
