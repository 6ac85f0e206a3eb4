package pvesim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// checkPCIMappings is what qemu-server's start does with hostpciN: mapping=ID: the mapping must
// have a device on the VM's node, or the start fails with PVE's text. Called with s.mu held.
func (s *Simulator) checkPCIMappings(vm *vmState) *apiError {
	for _, k := range sortedKeys(vm.conf) {
		if !strings.HasPrefix(k, "hostpci") || !localResourceRe.MatchString(k) {
			continue
		}
		for _, part := range strings.Split(vm.conf[k], ",") {
			id, ok := strings.CutPrefix(part, "mapping=")
			if ok && !s.pciMappings[id][vm.node] {
				return errf("PCI device mapping not found for '%s'", id)
			}
		}
	}
	return nil
}

// getPCIMappings is GET /cluster/mapping/pci: every mapping the caller holds Mapping.Audit,
// Mapping.Use or Mapping.Modify on, with one property string per node that has a device, as PVE
// stores them. The simulator's privileges are one flat set per token, so a token sees all of them
// or none.
func (s *Simulator) getPCIMappings(rq *request) (any, *apiError) {
	out := []map[string]any{}
	if !rq.auth.has("Mapping.Audit") && !rq.auth.has("Mapping.Use") && !rq.auth.has("Mapping.Modify") {
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(s.pciMappings)) {
		devices := []string{}
		for i, node := range slices.Sorted(maps.Keys(s.pciMappings[id])) {
			devices = append(devices, fmt.Sprintf("node=%s,path=0000:%02x:00.0,id=10de:2204,iommugroup=%d", node, i+1, 10+i))
		}
		out = append(out, map[string]any{"id": id, "map": devices})
	}
	return out, nil
}
