package v1alpha1

import "fmt"

// ProviderMismatch says why the claim spec cannot be built by a HypervisorCluster of provider
// kind named cluster, or "" when it can: provider-specific settings (spec.proxmox) of another
// provider would be silently dropped, so they are refused instead. The MachineClaim and
// MachineClaimTemplate controllers report it with the reason ProviderMismatch.
func (s *MachineClaimSpec) ProviderMismatch(kind ProviderType, cluster string) string {
	if s.Proxmox != nil && kind != ProviderProxmox {
		return fmt.Sprintf("spec.proxmox is set but HypervisorCluster %s has provider %s: remove spec.proxmox or use a Proxmox HypervisorCluster", cluster, kind)
	}
	return ""
}
