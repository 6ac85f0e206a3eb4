package pvesim

import "strings"

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
