package connection

import (
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Providers returns every kind of hypervisor this manager connects to, keyed by spec.provider: one
// line per provider. A HypervisorCluster whose provider is not here is not Available, with reason
// UnsupportedProvider.
func Providers() map[infrav1.ProviderType]ProviderBuilder {
	return map[infrav1.ProviderType]ProviderBuilder{
		infrav1.ProviderProxmox: Proxmox{Build: DefaultBuilder},
	}
}
