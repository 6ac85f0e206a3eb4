package platform

import (
	"context"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// Source gives each RunnerPool the client of its CI platform. It is the one seam between
// HyperFleet and CI platforms: the controllers, the webhook receiver and the bootstrap service
// all reach a platform through a Source, built and instrumented once where each process is
// assembled (the manager, the bootstrap service). Each platform package provides a Source for its
// kind and registers it (Register); NewSource returns the one that dispatches on a pool's
// spec.platform, so a new platform is a new package and a line in pkg/platform/all, not a change
// to its callers.
type Source interface {
	// Platform returns the client of pool's CI platform and the effective scope its runners
	// register in. A pool whose configuration cannot be used yields ErrCredentials,
	// ErrInsecureURL or ErrCABundle (nothing was sent to the platform), a pool of a platform the
	// process has no driver for yields ErrUnsupported, a namespace no admin enabled yields
	// tenancy.ErrNamespaceNotEnabled.
	Platform(ctx context.Context, pool *fleetv1.RunnerPool) (Platform, Scope, error)
	// Installation is the platform account pool's credentials have proven to hold, the key of
	// its job claims and of webhook routing. Values written in a Secret prove nothing; only the
	// platform can say that the credentials belong to the account. GitHub: the App installation ID
	// in decimal (proven by minting an installation token); GitLab: the instance's host, as in
	// the webhooks' URLs (proven by reading the pool's group, project or instance runners with
	// the token, so the pool may act on that scope of that instance); Buildkite: the organization slug (proven by reading the organization's cluster with
	// the token).
	Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error)
}
