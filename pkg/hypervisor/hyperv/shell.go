package hyperv

import (
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
)

// Result is what one PowerShell run printed and how it exited.
type Result = winrmclient.Result

// errorText turns PowerShell's error stream (CLIXML when the output is redirected) into text.
func errorText(stderr string) string { return winrmclient.StderrText(stderr) }

func networkName(n *hypervisor.NetworkSpec) string { return n.Name }
