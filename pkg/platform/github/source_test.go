package github

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// TestPoolClientsErrorsArePlatformNeutral: callers of the platform.Source (the controllers, the
// bootstrap service) decide on the platform-neutral sentinels alone, without importing this
// package; GitHub's own errors and messages stay as they were.
func TestPoolClientsErrorsArePlatformNeutral(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	fake.InstallationID("acme")
	impostor := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	app := map[string][]byte{KeyAppID: []byte(fmt.Sprint(fake.AppID())), KeyPrivateKey: fake.AppKeyPEM()}
	tests := []struct {
		name    string
		secrets map[string]map[string][]byte
		spec    func(*fleetv1.GitHubSpec)
		// want is the platform-neutral class, github the GitHub error it is (nil: none of them).
		want, github error
		message      string
	}{
		{name: "no credentials Secret", want: platform.ErrCredentials, github: ErrCredentials, message: "GitHub App credentials: Secret team-a/github-app not found"},
		{name: "an App ID that is no number", secrets: map[string]map[string][]byte{"github-app": {KeyAppID: []byte("x"), KeyPrivateKey: fake.AppKeyPEM()}},
			want: platform.ErrCredentials, github: ErrCredentials, message: "app-id is not a number"},
		{name: "plain http://", secrets: map[string]map[string][]byte{"github-app": app},
			spec: func(s *fleetv1.GitHubSpec) { s.APIURL = "http://ghes.example.com/api/v3/" },
			want: platform.ErrInsecureURL, github: ErrInsecureURL, message: "allowInsecureHTTP is not set"},
		{name: "a CA bundle Secret that is missing", secrets: map[string]map[string][]byte{"github-app": app},
			spec: func(s *fleetv1.GitHubSpec) { s.CABundleRef = &fleetv1.SecretKeyReference{Name: "absent"} },
			want: platform.ErrCABundle, message: "CI platform API CA bundle: Secret team-a/absent not found"},
		{name: "a server another CA vouches for",
			secrets: map[string]map[string][]byte{"github-app": app, "ghes-ca": {DefaultCAKey: impostor.CACertPEM()}},
			spec:    func(s *fleetv1.GitHubSpec) { s.CABundleRef = &fleetv1.SecretKeyReference{Name: "ghes-ca"} },
			want:    platform.ErrTLS, message: "certificate"},
		{name: "usable", secrets: map[string]map[string][]byte{"github-app": app, "ghes-ca": {DefaultCAKey: fake.CACertPEM()}},
			spec: func(s *fleetv1.GitHubSpec) { s.CABundleRef = &fleetv1.SecretKeyReference{Name: "ghes-ca"} }},
	}
	neutral := []error{platform.ErrCredentials, platform.ErrInsecureURL, platform.ErrCABundle, platform.ErrTLS}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reader := secrets{}
			for name, data := range tt.secrets {
				reader.add("team-a", name, name, data)
			}
			spec := fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}, APIURL: fake.URL() + "/",
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}
			if tt.spec != nil {
				tt.spec(&spec)
			}
			pool := builder.NewRunnerPool("linux", "team-a").WithGitHub(spec).Build()
			var src platform.Source = &PoolClients{Reader: reader}

			_, err := src.Installation(context.Background(), pool)
			if err == nil {
				var p platform.Platform
				var scope platform.Scope
				if p, scope, err = src.Platform(context.Background(), pool); err == nil {
					_, err = p.ListRunners(context.Background(), scope)
				}
			}
			if tt.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(err).To(MatchError(ContainSubstring(tt.message)))
			if tt.github != nil {
				g.Expect(err).To(MatchError(tt.github))
			}
			for _, other := range neutral {
				if other != tt.want {
					g.Expect(errors.Is(err, other)).To(BeFalse(), "%v is not %v", err, other)
				}
			}
		})
	}
}

// TestTLSErrorsKeepTheirClass: a refused TLS handshake is marked platform.ErrTLS on top of its
// class, so retries and traces (error.type) see what they saw before.
func TestTLSErrorsKeepTheirClass(t *testing.T) {
	g := NewWithT(t)
	impostor := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	impostor.InstallationID("acme")
	c, err := NewClient(Config{BaseURL: impostor.URL(), AppID: impostor.AppID(), PrivateKeyPEM: impostor.AppKeyPEM()})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ListRunners(context.Background(), platform.Scope{Organization: "acme"})
	g.Expect(err).To(MatchError(platform.ErrTLS))
	g.Expect(platform.IsTLSError(err)).To(BeTrue())
	g.Expect(err).To(MatchError(platform.ErrTransient))
	g.Expect(impostor.CredentialedRequests()).To(BeZero())
}
