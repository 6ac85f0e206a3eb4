package devfleet

import (
	"context"
	"fmt"
	"os"
	"time"
)

// RunTests is the body of an end-to-end test package's TestMain: it starts a fleet with opts in a
// fresh temporary state directory, runs the tests against it (run is typically a closure around
// testing.M.Run), stops it, and keeps the logs when a test failed. It returns the exit code.
func RunTests(name string, opts Options, run func(*Fleet) int) int {
	stateDir, err := os.MkdirTemp("", "hyperfleet-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts.StateDir = stateDir
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	fleet, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: starting the local fleet: %v\n", name, err)
		_ = os.RemoveAll(stateDir)
		return 1
	}
	code := run(fleet)
	fleet.Stop()
	if code != 0 {
		// The component and VM logs explain a failure; keep them.
		fmt.Fprintf(os.Stderr, "%s: logs kept in %s\n", name, fleet.State.LogDir)
	} else {
		_ = os.RemoveAll(stateDir)
	}
	return code
}
