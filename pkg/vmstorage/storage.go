package vmstorage

import (
	"fmt"
	"slices"
	"sort"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// StorageName is the storage's name on the hypervisor.
func StorageName(s *hfv1.VMStorage) string {
	if s.Spec.StorageName != "" {
		return s.Spec.StorageName
	}
	return s.Name
}

// Pool is the storage as a provider defines it.
func Pool(s *hfv1.VMStorage, owner hypervisor.Ownership) hypervisor.StoragePool {
	content := s.Spec.Content
	if len(content) == 0 {
		content = []string{"images"}
	}
	return hypervisor.StoragePool{
		Name: StorageName(s), Owner: owner, Adopt: s.Spec.Adopt, Type: string(s.Spec.Type),
		Path: s.Spec.Path, Pool: s.Spec.Pool, Server: s.Spec.Server, Export: s.Spec.Export,
		Nodes: s.Spec.Nodes, Content: content, Encrypted: s.Spec.Encrypted,
	}
}

// Allowed reports whether VMs of namespace may be placed on the storage.
func Allowed(s *hfv1.VMStorage, namespace string) bool {
	return s.Namespace == namespace || slices.Contains(s.Spec.AllowedNamespaces, namespace)
}

// RealizationFor finds the storage's realisation a VM of HypervisorCluster hc is placed through,
// as vmnetwork.RealizationFor does for networks.
func RealizationFor(s *hfv1.VMStorage, hc *infrav1.HypervisorCluster) (hfv1.VMStorageRealization, error) {
	for _, r := range s.Status.Realizations {
		same := s.Namespace == hc.Namespace && r.Cluster == hc.Name
		shared := s.Namespace != hc.Namespace && r.Endpoint != "" && r.Endpoint == hc.Spec.Endpoint
		if !same && !shared {
			continue
		}
		if !r.Ready {
			return r, fmt.Errorf("VMStorage %s/%s is not ready on HypervisorCluster %s: %s: %s", s.Namespace, s.Name, r.Cluster, r.Reason, r.Message)
		}
		return r, nil
	}
	return hfv1.VMStorageRealization{}, fmt.Errorf("VMStorage %s/%s is not defined on the hypervisor of HypervisorCluster %s/%s", s.Namespace, s.Name, hc.Namespace, hc.Name)
}

// Candidate is a storage a claim may use, with its capacity per node on the claim's hypervisor.
type Candidate struct {
	Storage     *hfv1.VMStorage
	Realization hfv1.VMStorageRealization
	// PendingBytes are promised to claims placed on the storage whose disks it does not show yet,
	// and CommittedBytes to every claim placed on it, by node (a shared storage's under "").
	PendingBytes   map[string]int64
	CommittedBytes map[string]int64
}

// Room is how many bytes the candidate can still take on node: the reported free space less the
// disks it cannot show yet, and never more than its size less every disk placed on it, so a
// reading taken while a clone was under way cannot promise the same bytes twice.
func (c Candidate) Room(node string) int64 {
	for _, n := range c.Realization.Nodes {
		if n.Node != node || !n.Active {
			continue
		}
		key := node
		if c.Realization.Shared {
			key = ""
		}
		return min(n.AvailableBytes-c.PendingBytes[key], n.TotalBytes-c.CommittedBytes[key])
	}
	return -1 // not on that node
}

// Choose picks, for a VM whose disks need bytes on node, the candidate with the most room there;
// ok is false when none has room.
func Choose(cands []Candidate, node string, bytes int64) (Candidate, bool) {
	best, found := Candidate{}, false
	for _, c := range cands {
		if room := c.Room(node); room >= bytes && (!found || room > best.Room(node)) {
			best, found = c, true
		}
	}
	return best, found
}

// NodesWithRoom lists the nodes where some candidate can take bytes, sorted.
func NodesWithRoom(cands []Candidate, bytes int64) []string {
	set := map[string]bool{}
	for _, c := range cands {
		for _, n := range c.Realization.Nodes {
			if c.Room(n.Node) >= bytes {
				set[n.Node] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
