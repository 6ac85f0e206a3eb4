package placement

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// ErrNoCapacity means no allowed node can hold the VM.
var ErrNoCapacity = errors.New("no allowed node has enough free memory")

// Request is what a VM needs.
type Request struct {
	MemoryMiB int
	// FailureDomain pins the VM to one node; empty allows any allowed node.
	FailureDomain string
	// Allowed lists the nodes VMs may use; empty allows every online node.
	Allowed []string
	// Reserved is memory (MiB) already promised per node to VMs that do not show in the node's
	// usage yet.
	Reserved map[string]int
}

// ChooseNode returns the online, allowed node with the most free memory left after reservations
// that can still hold the request. Ties go to the node name first in order, so the choice is stable.
func ChooseNode(nodes []hypervisor.Node, req Request) (string, error) {
	allowed := map[string]bool{}
	for _, n := range req.Allowed {
		allowed[n] = true
	}
	type candidate struct {
		name string
		free int64
	}
	var cands []candidate
	for _, n := range nodes {
		if !n.Online || (len(allowed) > 0 && !allowed[n.Name]) {
			continue
		}
		if req.FailureDomain != "" && n.Name != req.FailureDomain {
			continue
		}
		free := int64(n.MemoryFree/(1<<20)) - int64(req.Reserved[n.Name])
		if free < int64(req.MemoryMiB) {
			continue
		}
		cands = append(cands, candidate{n.Name, free})
	}
	if len(cands) == 0 {
		if req.FailureDomain != "" {
			return "", fmt.Errorf("%w: failure domain %q cannot hold %d MiB", ErrNoCapacity, req.FailureDomain, req.MemoryMiB)
		}
		return "", fmt.Errorf("%w: %d MiB requested", ErrNoCapacity, req.MemoryMiB)
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].free != cands[j].free {
			return cands[i].free > cands[j].free
		}
		return cands[i].name < cands[j].name
	})
	return cands[0].name, nil
}

// Range is an inclusive VMID range.
type Range struct{ Start, End int }

// DefaultRange keeps HyperFleet's VMs away from the low IDs people assign by hand.
var DefaultRange = Range{Start: 100000, End: 199999}

// Candidate proposes a starting VMID for the claim with the given UID: a stable position in the
// range derived from the UID, so concurrent claims start their search at different IDs and a
// restarted controller proposes the same one again.
func Candidate(r Range, uid string, attempt int) int {
	span := r.End - r.Start + 1
	if span <= 0 {
		return r.Start
	}
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%s/%d", uid, attempt)
	return r.Start + int(h.Sum32()%uint32(span))
}
