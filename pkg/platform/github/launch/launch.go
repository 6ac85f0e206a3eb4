// Package launch starts GitHub's Actions runner for one job in the guest. It is linked into the
// agent and links nothing of GitHub's API client.
package launch

import (
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
)

func init() { launch.Register("github", Command) }

// Command is <dir>/run.sh --jitconfig <encoded JIT config>: the runner registers, takes one job
// and exits.
func Command(config string, s launch.Setup) (launch.Command, error) {
	return launch.Command{Args: []string{s.Program, "--jitconfig", config}}, nil
}
