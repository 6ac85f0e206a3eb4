package claimplacement

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/sharedcall"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// pciMappingTTL is how long a HypervisorCluster's PCI mapping listing is shared by its claims:
// mappings change when an administrator edits them, not per VM.
const pciMappingTTL = 30 * time.Second

// PCIMappingCache shares the PCI resource mapping listing among the claims of a HypervisorCluster
// (keyed by provider instance, as templateCache is): a burst of GPU runners lists the mappings
// once, not once per VM.
type PCIMappingCache struct {
	mu      sync.Mutex
	entries map[hypervisor.Provider]pciMappingEntry
	reads   sharedcall.Group[hypervisor.Provider, map[string][]string]
}

type pciMappingEntry struct {
	mappings map[string][]string
	at       time.Time
}

func (pc *PCIMappingCache) list(ctx context.Context, p hypervisor.PCIMapper, key hypervisor.Provider) (map[string][]string, error) {
	pc.mu.Lock()
	e, ok := pc.entries[key]
	pc.mu.Unlock()
	if ok && time.Since(e.at) < pciMappingTTL {
		return e.mappings, nil
	}
	return pc.reads.Do(ctx, key, func() (map[string][]string, error) {
		m, err := p.PCIMappingNodes(ctx)
		if err != nil {
			return nil, err
		}
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if pc.entries == nil {
			pc.entries = map[hypervisor.Provider]pciMappingEntry{}
		}
		pc.entries[key] = pciMappingEntry{mappings: m, at: time.Now()}
		return m, nil
	})
}

// claimPCIMappings are the PCI resource mappings the claim's VM names.
func claimPCIMappings(c *infrav1.MachineClaim) []string {
	if c.Spec.Proxmox == nil {
		return nil
	}
	var out []string
	for _, d := range c.Spec.Proxmox.PCIDevices {
		out = append(out, d.Mapping)
	}
	return out
}

// PCIReasons says why each of the nodes cannot take the claim's PCI devices (placement.PCIReasons).
// It is nil when the claim names none, or the provider cannot say (it has no resource mappings, as
// before Proxmox VE 8): the start then reports a missing device in PVE's words. cache may be nil.
func PCIReasons(ctx context.Context, cache *PCIMappingCache, p hypervisor.Provider, c *infrav1.MachineClaim, nodes []hypervisor.Node) (map[string]string, error) {
	wanted := claimPCIMappings(c)
	mapper, ok := hypervisor.As[hypervisor.PCIMapper](p)
	if len(wanted) == 0 || !ok {
		return nil, nil
	}
	var (
		mappings map[string][]string
		err      error
	)
	if cache != nil {
		mappings, err = cache.list(ctx, mapper, p)
	} else {
		mappings, err = mapper.PCIMappingNodes(ctx)
	}
	switch {
	case errors.Is(err, hypervisor.ErrUnsupported), errors.Is(err, hypervisor.ErrNotFound):
		ctrl.LoggerFrom(ctx).V(1).Info("the hypervisor lists no PCI resource mappings; placing without them", "error", err.Error())
		return nil, nil
	case err != nil:
		return nil, err
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return placement.PCIReasons(names, mappings, wanted), nil
}

// DescribeReasons lists each node with why it was left out, by node name.
func DescribeReasons(reasons map[string]string) string {
	parts := make([]string, 0, len(reasons))
	for _, n := range slices.Sorted(maps.Keys(reasons)) {
		parts = append(parts, n+": "+reasons[n])
	}
	return strings.Join(parts, "; ")
}
