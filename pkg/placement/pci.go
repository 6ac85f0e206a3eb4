package placement

import (
	"fmt"
	"slices"
	"strings"
)

// PCIReasons says why each of nodes cannot take a VM naming the PCI resource mappings wanted: a
// node needs a device for every one of them, or the VM fails to start there. mappings is the
// hypervisor's listing, mapping to the nodes with a device; a mapping missing from it has a device
// nowhere the credentials can see. Nodes that can take the VM are absent from the answer.
func PCIReasons(nodes []string, mappings map[string][]string, wanted []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		var lacking []string
		for _, m := range wanted {
			if !slices.Contains(mappings[m], n) {
				lacking = append(lacking, m)
			}
		}
		if len(lacking) > 0 {
			out[n] = fmt.Sprintf("has no device for PCI mapping %s", strings.Join(lacking, ", "))
		}
	}
	return out
}
