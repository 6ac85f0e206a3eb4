package github

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// secrets is a client.Reader holding Secrets only.
type secrets map[client.ObjectKey]*corev1.Secret

func (s secrets) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	sec, ok := s[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	sec.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (s secrets) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not supported")
}

func (s secrets) add(ns, name, uid string, data map[string][]byte) {
	s[client.ObjectKey{Namespace: ns, Name: name}] = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + uid), ResourceVersion: "1"}, Data: data}
}

// TestPoolClientsTrustOnlyTheCABundle: a pool's caBundleRef is the only trust anchor of its
// GitHub API. A server whose certificate another CA signed (a man in the middle, or a GHES
// impostor) fails the TLS handshake before any request, so neither the App's JWT nor an
// installation token ever reaches it; a missing or unparsable bundle sends nothing at all.
func TestPoolClientsTrustOnlyTheCABundle(t *testing.T) {
	impostor := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	tests := []struct {
		name    string
		ref     *fleetv1.SecretKeyReference
		data    map[string][]byte
		wantErr func(g Gomega, err error)
	}{
		{name: "the server's CA", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca"}},
		{name: "a named key", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca", Key: "bundle.pem"}},
		{name: "another CA", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca"},
			data: map[string][]byte{DefaultCAKey: impostor.CACertPEM()},
			wantErr: func(g Gomega, err error) {
				g.Expect(platform.IsTLSError(err)).To(BeTrue(), "a certificate error: %v", err)
				g.Expect(err.Error()).To(ContainSubstring("certificate"))
			}},
		{name: "no bundle: system roots", wantErr: func(g Gomega, err error) { g.Expect(platform.IsTLSError(err)).To(BeTrue(), "%v", err) }},
		{name: "missing Secret", ref: &fleetv1.SecretKeyReference{Name: "absent"},
			wantErr: func(g Gomega, err error) { g.Expect(err).To(MatchError(platform.ErrCABundle)) }},
		{name: "missing key", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca", Key: "other.pem"},
			wantErr: func(g Gomega, err error) { g.Expect(err).To(MatchError(platform.ErrCABundle)) }},
		{name: "not PEM", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca"},
			data:    map[string][]byte{DefaultCAKey: []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")},
			wantErr: func(g Gomega, err error) { g.Expect(err).To(MatchError(platform.ErrCABundle)) }},
		{name: "a private key instead", ref: &fleetv1.SecretKeyReference{Name: "ghes-ca"},
			data:    map[string][]byte{DefaultCAKey: otherRSAKeyPEM(t)},
			wantErr: func(g Gomega, err error) { g.Expect(err).To(MatchError(platform.ErrCABundle)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
			fake.InstallationID("acme")
			data := tt.data
			if data == nil {
				data = map[string][]byte{DefaultCAKey: fake.CACertPEM(), "bundle.pem": fake.CACertPEM()}
			}
			reader := secrets{}
			reader.add("team-a", "github-app", "app", map[string][]byte{
				KeyAppID: []byte(fmt.Sprint(fake.AppID())), KeyPrivateKey: fake.AppKeyPEM()})
			reader.add("team-a", "ghes-ca", "ca", data)
			pool := builder.NewRunnerPool("linux", "team-a").WithGitHub(fleetv1.GitHubSpec{Organization: "acme",
				Labels: []string{"linux"}, APIURL: fake.URL() + "/", CABundleRef: tt.ref,
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).Build()
			clients := &PoolClients{Reader: reader}

			_, err := clients.Installation(ctx, pool)
			if err == nil {
				var c *Client
				var scope platform.Scope
				c, scope, err = clients.For(ctx, pool)
				g.Expect(err).NotTo(HaveOccurred())
				_, _, err = jitConfig(c, ctx, scope, platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
			}

			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(fake.Runners()).To(ConsistOf(HaveField("Name", "hf-1")), "App token and API calls both verified the CA")
				return
			}
			g.Expect(err).To(HaveOccurred())
			tt.wantErr(g, err)
			g.Expect(fake.CredentialedRequests()).To(BeZero(), "neither the App JWT nor a token reached the server")
			g.Expect(fake.RequestCounts()).To(BeEmpty())
			g.Expect(fake.Runners()).To(BeEmpty())
		})
	}
}

// TestParseCABundle: every PEM block must be a certificate that parses.
func TestParseCABundle(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	ca := fake.CACertPEM()
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{name: "one certificate", data: ca, ok: true},
		{name: "two certificates", data: append(append([]byte{}, ca...), ca...), ok: true},
		{name: "empty", data: nil},
		{name: "text", data: []byte("hello")},
		{name: "certificate then junk", data: append(append([]byte{}, ca...), []byte("junk")...)},
		{name: "private key", data: otherRSAKeyPEM(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := platform.ParseCABundle(tt.data)
			g := NewWithT(t)
			g.Expect(err == nil).To(Equal(tt.ok), "%v", err)
			if !tt.ok {
				g.Expect(err).To(MatchError(platform.ErrCABundle))
			}
		})
	}
}
