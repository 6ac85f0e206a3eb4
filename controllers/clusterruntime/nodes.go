package clusterruntime

import (
	"context"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/sharedcall"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// NodeListingMaxAge is how old a cluster's node listing may be for placement to use it: two
// health checks at the default 30 s interval.
const NodeListingMaxAge = time.Minute

// nodeListings is the cluster's last node listing (hosts, online, free memory), shared between
// its health check, which lists the nodes every interval, its host drain, and the placement of its
// VMs. It belongs to the provider that made it, so a HypervisorCluster whose settings change (a new
// provider) lists afresh. Free memory a listing does not show yet is counted by placement itself:
// claims with a host but no running VM, claims started since the listing, and promised room.
type nodeListings struct {
	mu   sync.Mutex
	last nodeListing
	// reads shares a listing under way among the claims that found none fresh meanwhile.
	reads sharedcall.Group[hypervisor.Provider, nodeListing]
}

type nodeListing struct {
	provider hypervisor.Provider
	nodes    []hypervisor.Node
	at       time.Time
}

// PutNodes records a listing of p's nodes made at at; a zero at forgets the listing (placement
// found it wrong).
func (rt *Runtime) PutNodes(p hypervisor.Provider, nodes []hypervisor.Node, at time.Time) {
	rt.nodes.mu.Lock()
	defer rt.nodes.mu.Unlock()
	rt.nodes.last = nodeListing{provider: p, nodes: nodes, at: at}
}

// Nodes returns p's nodes from a listing younger than NodeListingMaxAge, or lists them now; and
// when the listing was made.
func (rt *Runtime) Nodes(ctx context.Context, p hypervisor.Provider) ([]hypervisor.Node, time.Time, error) {
	rt.nodes.mu.Lock()
	l := rt.nodes.last
	rt.nodes.mu.Unlock()
	if l.provider == p && !l.at.IsZero() && time.Since(l.at) <= NodeListingMaxAge {
		return l.nodes, l.at, nil
	}
	l, err := rt.nodes.reads.Do(ctx, p, func() (nodeListing, error) {
		at := time.Now()
		nodes, err := p.Nodes(ctx)
		if err != nil {
			return nodeListing{}, err
		}
		rt.PutNodes(p, nodes, at)
		return nodeListing{provider: p, nodes: nodes, at: at}, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return l.nodes, l.at, nil
}
