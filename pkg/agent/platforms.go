package agent

// The CI platforms whose runners the agent starts: each platform's launch package, linked by one
// line in pkg/platform/all/launches.
import _ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all/launches"
