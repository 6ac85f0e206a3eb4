package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// ExitIfShort ends a package's TestMain at once, saying so, when go test runs with -short: every
// test of the package needs what -short promises not to start (an API server, a manager, a
// browser). `make test-unit` runs with -short.
func ExitIfShort(needs string) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		fmt.Printf("skipped in -short mode: the tests need %s\n", needs)
		os.Exit(0)
	}
}
