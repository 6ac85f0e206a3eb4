// Package all registers every CI platform HyperFleet ships with pkg/platform. It is the one place
// that names the platform packages: processes import it for its side effect and reach platforms
// through platform.NewSource and platform.Lookup only.
package all

import (
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
)

func init() {
	platform.Register(github.Driver())
	platform.Register(gitlab.Driver())
	platform.Register(buildkite.Driver())
}
