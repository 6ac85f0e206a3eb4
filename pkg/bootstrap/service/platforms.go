package service

import (
	"context"
	"errors"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// Runners is where one pool registers its runners.
type Runners struct {
	Kind     platform.Kind
	Registry platform.RunnerRegistry
	Scope    platform.Scope
}

// PlatformFactory returns the runner registry of a RunnerPool.
type PlatformFactory interface {
	For(ctx context.Context, pool *fleetv1.RunnerPool) (Runners, error)
}

// GitHubPlatforms hands out the GitHub App client of a pool, shared with the controllers'
// client cache rules: one client per Secret version, so a rotated key takes effect at once.
type GitHubPlatforms struct {
	clients github.PoolClients
}

// NewGitHubPlatforms reads pools' credentials Secrets through c; transport may be nil.
func NewGitHubPlatforms(c client.Reader, transport http.RoundTripper) *GitHubPlatforms {
	return &GitHubPlatforms{clients: github.PoolClients{Reader: c, Transport: transport}}
}

// For returns the GitHub registry and scope of pool. Unusable credentials, or a namespace no admin
// enabled for HyperFleet, are the service's problem, not the VM's: they answer 503 so the agent
// retries while an operator fixes them.
func (g *GitHubPlatforms) For(ctx context.Context, pool *fleetv1.RunnerPool) (Runners, error) {
	c, scope, err := g.clients.For(ctx, pool)
	if err != nil {
		if errors.Is(err, github.ErrCredentials) || errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return Runners{}, refusal(http.StatusServiceUnavailable, err)
		}
		return Runners{}, err
	}
	return Runners{Kind: platform.KindGitHub, Registry: pinstrumented.Wrap(c), Scope: scope}, nil
}
