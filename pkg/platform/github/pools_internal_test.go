package github

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestPoolClientsRefusePlainHTTP: a pool stored before the API server refused http:// API URLs
// gets no client at all, so its credentials are never sent in clear text; nothing is even read.
func TestPoolClientsRefusePlainHTTP(t *testing.T) {
	pool := builder.NewRunnerPool("old", "team-a").WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"},
		APIURL: "HTTP://ghes.example.com/api/v3/", CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).Build()
	g := NewWithT(t)
	// No Reader: reading the Secret would panic.
	_, _, err := (&PoolClients{}).For(context.Background(), pool)
	g.Expect(err).To(MatchError(ErrInsecureURL))
	_, err = (&PoolClients{}).Installation(context.Background(), pool)
	g.Expect(err).To(MatchError(ErrInsecureURL))
}
