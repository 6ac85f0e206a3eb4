package main

import (
	"flag"
	"log/slog"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// executorFlags is the hook for the executor the simulator hands commands to: it may register its
// own flags on fs and returns the constructor run calls after parsing. The simulated Hyper-V hosts
// plug in here; until then every command is answered as cmd.exe answers an unknown program
// (a nil Executor).
func executorFlags(_ *flag.FlagSet) func(*slog.Logger) (hvsim.Executor, error) {
	return func(*slog.Logger) (hvsim.Executor, error) { return nil, nil }
}
