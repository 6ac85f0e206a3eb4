package buildkite_test

import (
	"os"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
)

// TestMain registers the driver as pkg/platform/all does in every process.
func TestMain(m *testing.M) {
	platform.Register(buildkite.Driver())
	os.Exit(m.Run())
}
