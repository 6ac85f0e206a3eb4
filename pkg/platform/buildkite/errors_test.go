package buildkite_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// TestRateLimitIsAnErrorNotARetryLoop: once the token's budget is spent, a call fails at once
// with ErrRateLimited and when to come back, after exactly one request: go-buildkite's own
// retry of throttled GETs (up to fifteen minutes of backoff) never runs.
func TestRateLimitIsAnErrorNotARetryLoop(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true, RateLimit: 3})
	s.CreateJob("api", []string{"queue=linux"})
	c := newClient(t, s, s.AddAPIToken(leastPrivilege...))
	for range 3 {
		_, err := c.Jobs(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	}
	remaining, ok := c.RateLimitRemaining()
	g.Expect(ok).To(BeTrue())
	g.Expect(remaining).To(Equal(0))

	start := time.Now()
	_, err := c.Jobs(ctx)
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	g.Expect(err).To(MatchError(platform.ErrRateLimited))
	g.Expect(platform.IsRetryable(err)).To(BeTrue())
	at, ok := platform.RetryAt(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(BeTemporally("~", time.Now().Add(time.Minute), 5*time.Second))
	g.Expect(s.Requests(fakebuildkite.EndpointListOrgBuilds)).To(Equal(4))

	// A write is throttled the same way, with Buildkite's reset time.
	s.InjectFault(fakebuildkite.EndpointCreateClusterToken, fakebuildkite.Fault{RateLimited: true, RetryAfter: 20 * time.Second})
	c2 := newClient(t, s, s.AddAPIToken(leastPrivilege...))
	_, err = c2.Register(ctx, "m-1", "", buildkite.AgentTags("linux", nil))
	g.Expect(err).To(MatchError(platform.ErrRateLimited))
	at, _ = platform.RetryAt(err)
	g.Expect(at).To(BeTemporally("~", time.Now().Add(20*time.Second), 5*time.Second))
}

// TestErrorsAreClassified: each failure maps to the platform class controllers act on.
func TestErrorsAreClassified(t *testing.T) {
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	good := s.AddAPIToken(leastPrivilege...)
	revoked := s.AddAPIToken(leastPrivilege...)
	s.RevokeAPIToken(revoked)

	t.Run("unknown token is 401", func(t *testing.T) {
		_, err := newClient(t, s, revoked).Jobs(ctx)
		NewWithT(t).Expect(err).To(MatchError(platform.ErrUnauthorized))
	})
	t.Run("missing scope is 403", func(t *testing.T) {
		_, err := newClient(t, s, s.AddAPIToken(fakebuildkite.ScopeReadBuilds)).Register(ctx, "m", "", nil)
		NewWithT(t).Expect(err).To(MatchError(platform.ErrUnauthorized))
	})
	t.Run("wrong cluster is 404", func(t *testing.T) {
		g := NewWithT(t)
		tr, _ := platform.TransportWithCA(nil, s.CACertPEM())
		c, err := buildkite.NewClient(buildkite.Config{BaseURL: s.URL(), AgentEndpoint: s.AgentEndpoint(), Organization: s.Organization(),
			ClusterID: "not-our-cluster", APIToken: good, Transport: tr})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Registrations(ctx)
		g.Expect(err).To(MatchError(platform.ErrNotFound))
	})
	t.Run("5xx is transient", func(t *testing.T) {
		g := NewWithT(t)
		s.FailNext(fakebuildkite.EndpointListOrgBuilds, 1, http.StatusBadGateway)
		_, err := newClient(t, s, good).Jobs(ctx)
		g.Expect(err).To(MatchError(platform.ErrTransient))
		g.Expect(platform.IsRetryable(err)).To(BeTrue())
	})
	t.Run("a server the CA does not vouch for is refused", func(t *testing.T) {
		g := NewWithT(t)
		other := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
		tr, _ := platform.TransportWithCA(nil, other.CACertPEM())
		c, err := buildkite.NewClient(buildkite.Config{BaseURL: s.URL(), AgentEndpoint: s.AgentEndpoint(), Organization: s.Organization(),
			ClusterID: s.ClusterID(), APIToken: good, Transport: tr})
		g.Expect(err).NotTo(HaveOccurred())
		before := s.Requests(fakebuildkite.EndpointListOrgBuilds)
		_, err = c.Jobs(ctx)
		g.Expect(err).To(MatchError(platform.ErrTLS))
		g.Expect(s.Requests(fakebuildkite.EndpointListOrgBuilds)).To(Equal(before), "no request reached the server")
	})
	t.Run("plain HTTP is refused unless allowed", func(t *testing.T) {
		g := NewWithT(t)
		plain := fakebuildkite.StartForTest(t, fakebuildkite.Options{})
		cfg := buildkite.Config{BaseURL: plain.URL(), AgentEndpoint: plain.AgentEndpoint(), Organization: plain.Organization(),
			ClusterID: plain.ClusterID(), APIToken: plain.AddAPIToken(leastPrivilege...)}
		_, err := buildkite.NewClient(cfg)
		g.Expect(err).To(MatchError(platform.ErrInsecureURL))
		cfg.AllowInsecureHTTP = true
		c, err := buildkite.NewClient(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Jobs(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	})
	t.Run("a CA bundle that is not a certificate is refused", func(t *testing.T) {
		_, err := platform.TransportWithCA(nil, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{0, 1, 2}}))
		NewWithT(t).Expect(err).To(MatchError(platform.ErrCABundle))
	})
	t.Run("configuration without a token or cluster is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := buildkite.NewClient(buildkite.Config{Organization: "acme", ClusterID: "c"})
		g.Expect(err).To(MatchError(platform.ErrCredentials))
		_, err = buildkite.NewClient(buildkite.Config{Organization: "acme", APIToken: "t"})
		g.Expect(err).To(MatchError(platform.ErrCredentials))
	})
}
