// Package launches links every CI platform's runner launch (pkg/platform/<kind>/launch) into the
// in-VM agent: one line per platform, the agent's counterpart of pkg/platform/all. It links no
// platform's API client.
package launches

import (
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite/launch"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/github/launch"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab/launch"
)
