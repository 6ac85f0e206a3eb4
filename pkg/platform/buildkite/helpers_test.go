package buildkite_test

import (
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// leastPrivilege are the scopes HyperFleet documents for its API token.
var leastPrivilege = []string{fakebuildkite.ScopeReadClusters, fakebuildkite.ScopeWriteClusters, fakebuildkite.ScopeReadBuilds}

// newClient returns the real client for a fake started over HTTPS, trusting only its CA.
func newClient(t *testing.T, s *fakebuildkite.Server, token string) *buildkite.Client {
	t.Helper()
	tr, err := platform.TransportWithCA(nil, s.CACertPEM())
	if err != nil {
		t.Fatal(err)
	}
	c, err := buildkite.NewClient(buildkite.Config{
		BaseURL: s.URL(), AgentEndpoint: s.AgentEndpoint(), Organization: s.Organization(), ClusterID: s.ClusterID(),
		APIToken: token, Transport: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
