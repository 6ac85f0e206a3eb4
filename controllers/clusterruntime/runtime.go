// Package clusterruntime keeps what the manager knows of each HypervisorCluster between
// reconciles: one Runtime per HypervisorCluster, made on its first use and dropped when the
// HypervisorCluster is deleted or stops being served. A Runtime holds the cluster's capacity queue
// (clone and delete slots, the line of claims waiting for room, the room promised to claims the
// cache does not show yet), its last node listing, its template and PCI mapping resolutions and the
// sweep's memory of orphan VMs. The MachineClaim, HypervisorCluster and host-drain controllers ask
// it; none of them keeps per-cluster state of its own.
//
// Everything here lives in the leader's memory and is rebuilt from the API on a new leader: the
// queue from the claims' status.task, the rest by reading the hypervisor again.
package clusterruntime

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/sweep"
)

// Runtimes are the manager's Runtimes, one per HypervisorCluster, beside the connection registry
// whose providers they are about.
type Runtimes struct {
	client   client.Client
	registry *connection.Registry
	// wakeups reconciles a claim whose turn came; the MachineClaim controller watches it.
	wakeups chan event.TypedGenericEvent[*infrav1.MachineClaim]

	mu       sync.Mutex
	clusters map[string]*Runtime
}

// New returns empty Runtimes. c reads the claims a new capacity queue starts from; registry is
// told to drop a cluster's connection when its Runtime is forgotten (nil in unit tests).
func New(c client.Client, registry *connection.Registry) *Runtimes {
	return &Runtimes{client: c, registry: registry, clusters: map[string]*Runtime{},
		wakeups: make(chan event.TypedGenericEvent[*infrav1.MachineClaim], 1024)}
}

// ClaimWakeups delivers the claims whose turn in a capacity queue came.
func (rs *Runtimes) ClaimWakeups() <-chan event.TypedGenericEvent[*infrav1.MachineClaim] {
	return rs.wakeups
}

// For returns hc's Runtime, made on first use.
func (rs *Runtimes) For(hc *infrav1.HypervisorCluster) *Runtime {
	key := connection.Key(hc)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rt, ok := rs.clusters[key]
	if !ok {
		rt = &Runtime{rs: rs, key: key, namespace: hc.Namespace, name: hc.Name,
			promised: map[string]promisedRoom{}, orphans: sweep.Orphans{}}
		rs.clusters[key] = rt
	}
	return rt
}

// Forget drops everything known of hc and its connection: it was deleted, or another
// installation serves it now.
func (rs *Runtimes) Forget(hc *infrav1.HypervisorCluster) {
	key := connection.Key(hc)
	rs.mu.Lock()
	delete(rs.clusters, key)
	rs.mu.Unlock()
	if rs.registry != nil {
		rs.registry.Forget(key)
	}
	metrics.DeleteQueue(key)
}

// Runtime is what the manager knows of one HypervisorCluster.
type Runtime struct {
	rs              *Runtimes
	key             string
	namespace, name string

	queueMu sync.Mutex
	queue   *capacity.Queue

	mu sync.Mutex
	// freeMemory is the free memory of the allowed online hosts at the last health check.
	freeMemory     uint64
	freeMemorySeen bool
	// promised are the nodes and memory promised to claims not yet running, by claim, until the
	// cache shows them: a claim woken right after another was placed must not take the same room
	// because the cache has not seen the first reservation yet.
	promised map[string]promisedRoom
	// orphans remembers the owned VMs whose claim is gone, for the sweep's grace period.
	orphans sweep.Orphans

	nodes     nodeListings
	templates templateCache
	pci       claimplacement.PCIMappingCache
}

// Key is the cluster's namespace/name.
func (rt *Runtime) Key() string { return rt.key }

// PCIMappings is the cluster's shared PCI resource mapping listing.
func (rt *Runtime) PCIMappings() *claimplacement.PCIMappingCache { return &rt.pci }

// Orphans is the sweep's memory of the cluster's orphan VMs.
func (rt *Runtime) Orphans() sweep.Orphans {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.orphans
}
