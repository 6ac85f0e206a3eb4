package github

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestNewClientValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "missing App ID", cfg: Config{PrivateKeyPEM: []byte("x")}},
		{name: "key is not PEM", cfg: Config{AppID: 1, PrivateKeyPEM: []byte("not a key")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClient(tt.cfg)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestErrorsAreClassified(t *testing.T) {
	ctx := context.Background()
	spec := platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}}
	tests := []struct {
		name    string
		scope   platform.Scope
		edit    func(*Config)
		prepare func(*fakegithub.Server)
		want    error
		retryAt bool
	}{
		{name: "App key not the App's", scope: orgScope("acme"), want: platform.ErrUnauthorized,
			edit: func(c *Config) { c.PrivateKeyPEM = otherRSAKeyPEM(t) }},
		{name: "bad App key with pinned installation", scope: orgScope("acme"), want: platform.ErrUnauthorized,
			edit: func(c *Config) { c.PrivateKeyPEM, c.InstallationID = otherRSAKeyPEM(t), 101 }},
		{name: "wrong App ID", scope: orgScope("acme"), want: platform.ErrUnauthorized,
			edit: func(c *Config) { c.AppID = 999 }},
		{name: "App not installed on the organization", scope: orgScope("globex"), want: platform.ErrNotFound},
		{name: "installation token refused", scope: orgScope("acme"), want: platform.ErrUnauthorized,
			prepare: func(f *fakegithub.Server) { f.FailNext(fakegithub.EndpointAccessToken, 1, http.StatusNotFound) }},
		{name: "token endpoint down", scope: orgScope("acme"), want: platform.ErrTransient,
			prepare: func(f *fakegithub.Server) {
				f.FailNext(fakegithub.EndpointAccessToken, 1, http.StatusServiceUnavailable)
			}},
		{name: "primary rate limit", scope: orgScope("acme"), want: platform.ErrRateLimited, retryAt: true,
			prepare: func(f *fakegithub.Server) {
				f.InjectFault(fakegithub.EndpointOrgJITConfig, fakegithub.Fault{RateLimited: true, RetryAfter: time.Minute})
			}},
		{name: "secondary rate limit", scope: orgScope("acme"), want: platform.ErrRateLimited, retryAt: true,
			prepare: func(f *fakegithub.Server) {
				f.InjectFault(fakegithub.EndpointOrgJITConfig, fakegithub.Fault{RetryAfter: 30 * time.Second})
			}},
		{name: "server error", scope: repoScope("acme/api"), want: platform.ErrTransient,
			prepare: func(f *fakegithub.Server) {
				f.FailNext(fakegithub.EndpointRepoJITConfig, 1, http.StatusInternalServerError)
			}},
		{name: "validation failure", scope: repoScope("acme/api"), want: platform.ErrInvalid,
			prepare: func(f *fakegithub.Server) {
				f.FailNext(fakegithub.EndpointRepoJITConfig, 1, http.StatusUnprocessableEntity)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			fake, c := newTestClient(t, fakegithub.Options{}, tt.edit)
			if tt.prepare != nil {
				tt.prepare(fake)
			}

			_, _, err := jitConfig(c, ctx, tt.scope, spec)

			g.Expect(err).To(MatchError(tt.want))
			_, hasRetryAt := platform.RetryAt(err)
			g.Expect(hasRetryAt).To(Equal(tt.retryAt))
			g.Expect(fake.Runners()).To(BeEmpty())
		})
	}
}

func TestClientRecoversAfterTransientFailure(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	fake.FailNext(fakegithub.EndpointOrgJITConfig, 1, http.StatusBadGateway)
	spec := platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}}

	_, _, err := jitConfig(c, context.Background(), orgScope("acme"), spec)
	g.Expect(err).To(MatchError(platform.ErrTransient))
	_, _, err = jitConfig(c, context.Background(), orgScope("acme"), spec)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(fake.Runners()).To(ConsistOf(HaveField("Name", "hf-1")))
}

func TestRateLimitRemainingTracksLastResponse(t *testing.T) {
	g := NewWithT(t)
	_, c := newTestClient(t, fakegithub.Options{RateLimit: 50}, nil)
	_, ok := c.RateLimitRemaining()
	g.Expect(ok).To(BeFalse(), "unknown before the first call")

	_, err := c.ListRunners(context.Background(), orgScope("acme"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ListRunners(context.Background(), orgScope("acme"))
	g.Expect(err).NotTo(HaveOccurred())

	// The second listing is unchanged: GitHub answers the conditional request 304, for free.
	remaining, ok := c.RateLimitRemaining()
	g.Expect(ok).To(BeTrue())
	g.Expect(remaining).To(Equal(49))
	g.Expect(c.NotModified()).To(Equal(int64(1)))
}

func TestClientOverTLSWithCustomCA(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	fake.InstallationID("acme")
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(fake.CACertPEM())).To(BeTrue())
	cfg := Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM()}

	untrusting, err := NewClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = untrusting.ListRunners(context.Background(), orgScope("acme"))
	g.Expect(err).To(HaveOccurred(), "the fake's certificate is not in the system pool")

	cfg.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	trusting, err := NewClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, id, err := jitConfig(trusting, context.Background(), orgScope("acme"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fake.Runners()).To(ConsistOf(HaveField("ID", id)))
}

func TestSlowGitHubTimesOut(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, func(c *Config) { c.HTTPTimeout = 200 * time.Millisecond })
	fake.InjectFault(fakegithub.EndpointOrgRunners, fakegithub.Fault{Delay: 5 * time.Second})
	start := time.Now()

	_, err := c.ListRunners(context.Background(), orgScope("acme"))

	g.Expect(err).To(MatchError(platform.ErrTransient))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
}

func TestClientRecoversFromRevokedTokenAndReinstall(t *testing.T) {
	tests := []struct {
		name    string
		disrupt func(*fakegithub.Server)
	}{
		{name: "tokens revoked", disrupt: func(f *fakegithub.Server) { f.RevokeTokens() }},
		{name: "App reinstalled under a new ID", disrupt: func(f *fakegithub.Server) {
			f.Uninstall("acme")
			f.InstallationID("acme")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			fake, c := newTestClient(t, fakegithub.Options{}, nil)
			_, err := c.ListRunners(ctx, orgScope("acme"))
			g.Expect(err).NotTo(HaveOccurred())
			tt.disrupt(fake)

			_, err = c.ListRunners(ctx, orgScope("acme"))
			g.Expect(err).To(MatchError(platform.ErrUnauthorized), "the cached token is refused once")
			_, _, err = jitConfig(c, ctx, orgScope("acme"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
			g.Expect(err).NotTo(HaveOccurred())

			g.Expect(fake.Runners()).To(ConsistOf(HaveField("Name", "hf-1")))
		})
	}
}
