package platform

import (
	"context"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// Source gives each RunnerPool the client of its CI platform. It is the one seam between
// HyperFleet and CI platforms: the controllers, the webhook receiver and the bootstrap service
// all reach a platform through a Source, built and instrumented once where each process is
// assembled (the manager, the bootstrap service). GitHub Actions is the one implementation today
// (github.PoolClients); a new platform is a new Source, not a change to its callers.
type Source interface {
	// Platform returns the client of pool's CI platform and the effective scope its runners
	// register in. A pool whose configuration cannot be used yields ErrCredentials,
	// ErrInsecureURL or ErrCABundle (nothing was sent to the platform), a namespace no admin
	// enabled yields tenancy.ErrNamespaceNotEnabled.
	Platform(ctx context.Context, pool *fleetv1.RunnerPool) (Platform, Scope, error)
	// Installation is the platform installation pool's credentials have proven to hold (GitHub:
	// the App installation), the key of its job claims. Numbers written in a Secret prove
	// nothing; only the platform can say that the credentials belong to the installation.
	Installation(ctx context.Context, pool *fleetv1.RunnerPool) (int64, error)
}
