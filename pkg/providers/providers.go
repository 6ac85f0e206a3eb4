package providers

import (
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/vsphere"
)

// Builders returns every kind of hypervisor HyperFleet connects to, keyed by spec.provider: one
// line per provider. A HypervisorCluster whose provider is not here is not Available, with reason
// UnsupportedProvider.
func Builders() map[infrav1.ProviderType]connection.ProviderBuilder {
	return map[infrav1.ProviderType]connection.ProviderBuilder{
		infrav1.ProviderProxmox: proxmox.Connector{},
		infrav1.ProviderHyperV:  hyperv.Connector{},
		infrav1.ProviderVSphere: vsphere.Connector{},
	}
}
