package service

import (
	"context"
	"errors"
	"net/http"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// platformOf returns the CI platform client and the scope of pool, from the platform.Source the
// service was assembled with (shared client cache: one client per Secret version, so a rotated
// key takes effect at once). Unusable credentials, or a namespace no admin enabled for
// HyperFleet, are the service's problem, not the VM's: they answer 503 so the agent retries while
// an operator fixes them.
func (s *Server) platformOf(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	p, scope, err := s.opts.Platforms.Platform(ctx, pool)
	if err != nil {
		if errors.Is(err, platform.ErrCredentials) || errors.Is(err, platform.ErrUnsupported) || errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return nil, scope, refusal(http.StatusServiceUnavailable, err)
		}
		return nil, scope, err
	}
	return p, scope, nil
}
