package console

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/providers"
)

// Inventory is the hypervisors' side of the picture, read by the console's own identity every
// refresh interval: each HypervisorCluster's hosts and the power state of HyperFleet's VMs. It is
// a cache only, rebuilt after a restart; what a person may see of it is decided per request by
// what that person may read in Kubernetes.
type Inventory struct {
	reader   client.Reader
	registry *connection.Registry
	interval time.Duration

	mu         sync.RWMutex
	clusters   map[string]*ClusterInventory
	namespaces []string
	refreshed  time.Time
}

// ClusterInventory is one HypervisorCluster as last read.
type ClusterInventory struct {
	Namespace, Name, Provider string
	Hosts                     []hypervisor.Node
	// VMs are HyperFleet's VMs on the cluster by host/ID.
	VMs map[string]hypervisor.VM
	// Foreign are the other VMs on the cluster (listed when the provider can), shown read-only.
	Foreign []hypervisor.VM
	// Error is why the cluster could not be read, empty when it could.
	Error string
	At    time.Time
}

// NewInventory reads through reader (the console's ServiceAccount) every interval.
func NewInventory(reader client.Reader, interval, timeout time.Duration) *Inventory {
	return &Inventory{reader: reader, registry: connection.NewRegistry(reader, timeout, providers.Builders()), interval: interval,
		clusters: map[string]*ClusterInventory{}}
}

// Start refreshes until ctx ends (a manager.Runnable).
func (inv *Inventory) Start(ctx context.Context) error {
	for {
		inv.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(inv.interval):
		}
	}
}

// Ready reports whether the inventory has been read once.
func (inv *Inventory) Ready() bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return !inv.refreshed.IsZero()
}

func (inv *Inventory) refresh(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("inventory")
	ctx, cancel := context.WithTimeout(ctx, inv.interval+30*time.Second)
	defer cancel()
	var nsList corev1.NamespaceList
	if err := inv.reader.List(ctx, &nsList); err != nil {
		log.Error(err, "listing namespaces")
	}
	var hcs infrav1.HypervisorClusterList
	if err := inv.reader.List(ctx, &hcs); err != nil {
		log.Error(err, "listing HypervisorClusters")
		return
	}
	clusters := map[string]*ClusterInventory{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ci := readCluster(ctx, inv.registry, hc)
			mu.Lock()
			clusters[connection.Key(hc)] = ci
			mu.Unlock()
		}()
	}
	wg.Wait()
	namespaces := make([]string, 0, len(nsList.Items))
	for _, ns := range nsList.Items {
		namespaces = append(namespaces, ns.Name)
	}
	sort.Strings(namespaces)
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if len(namespaces) > 0 {
		inv.namespaces = namespaces
	}
	inv.clusters = clusters
	inv.refreshed = time.Now()
}

func readCluster(ctx context.Context, registry *connection.Registry, hc *infrav1.HypervisorCluster) *ClusterInventory {
	ci := &ClusterInventory{Namespace: hc.Namespace, Name: hc.Name, Provider: string(connection.ProviderOf(hc)),
		VMs: map[string]hypervisor.VM{}, At: time.Now()}
	p, err := registry.Get(ctx, hc)
	if err != nil {
		ci.Error = err.Error()
		return ci
	}
	if ci.Hosts, err = p.Nodes(ctx); err != nil {
		ci.Error = err.Error()
		return ci
	}
	var vms []hypervisor.VM
	if lister, ok := hypervisor.As[hypervisor.VMLister](p); ok {
		vms, err = lister.AllVMs(ctx)
	} else {
		vms, err = p.OwnedVMs(ctx)
	}
	if err != nil {
		ci.Error = err.Error()
		return ci
	}
	for _, vm := range vms {
		if vm.Owner == nil {
			ci.Foreign = append(ci.Foreign, vm)
			continue
		}
		ci.VMs[vmHost(vm)+"/"+vmID(vm)] = vm
	}
	return ci
}

// Cluster returns the last reading of the HypervisorCluster namespace/name.
func (inv *Inventory) Cluster(namespace, name string) (*ClusterInventory, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	ci, ok := inv.clusters[namespace+"/"+name]
	return ci, ok
}

// Namespaces are the namespaces the console fans a person's listing out to when that person may
// not list cluster-wide.
func (inv *Inventory) Namespaces() []string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return append([]string(nil), inv.namespaces...)
}
