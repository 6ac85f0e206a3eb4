package placement

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var (
	// ErrNoCapacity means no allowed node can hold the VM.
	ErrNoCapacity = errors.New("no allowed node has enough free memory")
	// ErrNoTemplate means no allowed node holds a copy of the template a linked clone needs.
	ErrNoTemplate = errors.New("no allowed node holds the template")
)

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

// ChooseTemplate picks the source of a linked clone among copies of one template, one per node:
// the copy on the node ChooseNode prefers among the allowed nodes that hold one. A linked clone
// shares its template's disks, so on local storage it can only be made on the template's node.
func ChooseTemplate(nodes []hypervisor.Node, templates []hypervisor.Template, req Request) (hypervisor.Template, error) {
	held := map[string]hypervisor.Template{}
	var names []string
	for _, t := range templates {
		if len(req.Allowed) > 0 && !slices.Contains(req.Allowed, t.Ref.Node) {
			continue
		}
		held[t.Ref.Node] = t
		names = append(names, t.Ref.Node)
	}
	sort.Strings(names)
	switch {
	case len(held) == 0:
		return hypervisor.Template{}, fmt.Errorf("%w: copies are on %s, allowed nodes are %s", ErrNoTemplate, templateNodes(templates), strings.Join(req.Allowed, ", "))
	case req.FailureDomain != "" && held[req.FailureDomain].Ref.IsZero():
		return hypervisor.Template{}, fmt.Errorf("%w: failure domain %s has no copy (copies are on %s)", ErrNoTemplate, req.FailureDomain, strings.Join(names, ", "))
	}
	req.Allowed = names
	node, err := ChooseNode(nodes, req)
	if err != nil {
		return hypervisor.Template{}, err
	}
	return held[node], nil
}

// TemplateOn returns the copy of the template on node, or the first copy when node has none: a
// full clone may go anywhere, but copying from a local template is the quickest.
func TemplateOn(templates []hypervisor.Template, node string) hypervisor.Template {
	for _, t := range templates {
		if t.Ref.Node == node {
			return t
		}
	}
	if len(templates) == 0 {
		return hypervisor.Template{}
	}
	return templates[0]
}

func templateNodes(templates []hypervisor.Template) string {
	names := make([]string, 0, len(templates))
	for _, t := range templates {
		names = append(names, t.Ref.Node)
	}
	return strings.Join(names, ", ")
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

// AllowedNodes is nodes restricted to allowed (a HypervisorCluster's allowedNodes); empty allowed
// keeps every node. Providers list every node and this is the one place the restriction is
// applied, for failure domains; ChooseNode applies Request.Allowed the same way.
func AllowedNodes(nodes []hypervisor.Node, allowed []string) []hypervisor.Node {
	if len(allowed) == 0 {
		return nodes
	}
	var kept []hypervisor.Node
	for _, n := range nodes {
		if slices.Contains(allowed, n.Name) {
			kept = append(kept, n)
		}
	}
	return kept
}
