package proxmox

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// pciMapping is one entry of GET /cluster/mapping/pci: the mapping's ID and one property string
// per device ("node=pve1,path=0000:01:00.0,id=10de:2204,iommugroup=12").
type pciMapping struct {
	ID  string   `json:"id"`
	Map []string `json:"map"`
}

// PCIMappingNodes lists the cluster's PCI resource mappings (PVE 8 and later) with the nodes that
// have a device for each. PVE lists only the mappings the token has Mapping.Audit, Mapping.Use or
// Mapping.Modify on, so one HyperFleet may use is never missing here.
func (p *Provider) PCIMappingNodes(ctx context.Context) (map[string][]string, error) {
	var list []pciMapping
	const op = "list PCI mappings"
	if err := p.get(ctx, op, "/cluster/mapping/pci", &list); err != nil {
		if errors.Is(err, hypervisor.ErrInvalid) {
			// 501 "Method ... not implemented": resource mappings came with Proxmox VE 8.0.
			return nil, hypervisor.Errorf(hypervisor.ErrUnsupported, op, "this Proxmox VE has no PCI resource mappings: %v", err)
		}
		return nil, err
	}
	out := make(map[string][]string, len(list))
	for _, m := range list {
		nodes := []string{}
		for _, dev := range m.Map {
			for _, part := range strings.Split(dev, ",") {
				if node, ok := strings.CutPrefix(strings.TrimSpace(part), "node="); ok && node != "" && !slices.Contains(nodes, node) {
					nodes = append(nodes, node)
				}
			}
		}
		slices.Sort(nodes)
		out[m.ID] = nodes
	}
	return out, nil
}
