package gitlab_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// TestErrorsAreClassified: GitLab's answers become the platform's error classes, so the
// controllers decide without knowing GitLab: a revoked or under-scoped token is
// ErrUnauthorized, an unknown project ErrNotFound, a 5xx ErrTransient, and a 429 ErrRateLimited
// with the reset time GitLab announced, surfaced at once rather than retried.
func TestErrorsAreClassified(t *testing.T) {
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true, RateLimit: 3})
	s.AddProject("acme/api")
	scope := gitlab.Scope{Project: "acme/api"}

	t.Run("revoked token", func(t *testing.T) {
		g := NewWithT(t)
		tok := s.AddToken(leastPrivilege...)
		s.RevokeToken(tok)
		_, err := newClient(t, s, tok).Jobs(ctx, scope)
		g.Expect(err).To(MatchError(platform.ErrUnauthorized))
		g.Expect(platform.IsRetryable(err)).To(BeFalse())
	})
	t.Run("missing scope", func(t *testing.T) {
		g := NewWithT(t)
		_, err := newClient(t, s, s.AddToken(fakegitlab.ScopeReadAPI)).Register(ctx, scope, "m-1", "", gitlab.RunnerSettings{RunUntagged: true})
		g.Expect(err).To(MatchError(platform.ErrUnauthorized))
		var pe *platform.Error
		g.Expect(errors.As(err, &pe)).To(BeTrue())
		g.Expect(pe.StatusCode).To(Equal(http.StatusForbidden))
	})
	t.Run("unknown project", func(t *testing.T) {
		g := NewWithT(t)
		_, err := newClient(t, s, s.AddToken(leastPrivilege...)).Jobs(ctx, gitlab.Scope{Project: "acme/nope"})
		g.Expect(err).To(MatchError(platform.ErrNotFound))
	})
	t.Run("server error", func(t *testing.T) {
		g := NewWithT(t)
		s.FailNext(fakegitlab.EndpointListProjectJobs, 1, http.StatusBadGateway)
		_, err := newClient(t, s, s.AddToken(leastPrivilege...)).Jobs(ctx, scope)
		g.Expect(err).To(MatchError(platform.ErrTransient))
		g.Expect(platform.IsRetryable(err)).To(BeTrue())
	})
	t.Run("rate limited", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, s, s.AddToken(leastPrivilege...))
		var err error
		before := s.Requests(fakegitlab.EndpointListProjectJobs)
		for i := 0; i < 5 && err == nil; i++ {
			_, err = c.Jobs(ctx, scope)
		}
		g.Expect(err).To(MatchError(platform.ErrRateLimited))
		at, ok := platform.RetryAt(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(at).To(BeTemporally("~", time.Now().Add(time.Minute), 5*time.Second))
		// Three requests fit the budget (one resolved the project, two listed jobs); the third
		// listing was throttled and not retried.
		g.Expect(s.Requests(fakegitlab.EndpointListProjectJobs) - before).To(Equal(3))
		remaining, ok := c.RateLimitRemaining()
		g.Expect(ok).To(BeTrue())
		g.Expect(remaining).To(Equal(0))

		s.InjectFault(fakegitlab.EndpointGetProject, fakegitlab.Fault{RateLimited: true, RetryAfter: 30 * time.Second})
		_, err = newClient(t, s, s.AddToken(leastPrivilege...)).Jobs(ctx, scope)
		at, _ = platform.RetryAt(err)
		g.Expect(err).To(MatchError(platform.ErrRateLimited))
		g.Expect(at).To(BeTemporally("~", time.Now().Add(30*time.Second), 5*time.Second))
	})
}

// TestTransportRefusals: nothing is sent over plain HTTP unless allowed, a CA bundle must hold
// certificates, and a server the bundle does not vouch for is ErrTLS.
func TestTransportRefusals(t *testing.T) {
	g := NewWithT(t)
	_, err := gitlab.NewClient(gitlab.Config{URL: "http://gitlab.example.com", Token: "glpat-x"})
	g.Expect(err).To(MatchError(platform.ErrInsecureURL))
	_, err = gitlab.NewClient(gitlab.Config{URL: "http://gitlab.example.com", Token: "glpat-x", AllowInsecureHTTP: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = gitlab.NewClient(gitlab.Config{URL: "https://gitlab.example.com"})
	g.Expect(err).To(MatchError(platform.ErrCredentials))
	_, err = platform.TransportWithCA(nil, []byte("not a certificate"))
	g.Expect(err).To(MatchError(platform.ErrCABundle))

	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddProject("acme/api")
	other := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	tr, err := platform.TransportWithCA(nil, other.CACertPEM())
	g.Expect(err).NotTo(HaveOccurred())
	c, err := gitlab.NewClient(gitlab.Config{URL: s.URL(), Token: s.AddToken(leastPrivilege...), Transport: tr})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Jobs(context.Background(), gitlab.Scope{Project: "acme/api"})
	g.Expect(err).To(MatchError(platform.ErrTLS))
}
