package platform_test

import (
	"context"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// TestPoolConnectionRead: a pool's connection is checked in one order whatever the platform,
// each refusal with its class and message: an http:// endpoint before anything is read, then the
// credentials Secret and its token, then the CA bundle.
func TestPoolConnectionRead(t *testing.T) {
	_, ca, err := fakeserver.SelfSigned(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, "ci.example")
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"}, Data: data}
	}
	reader := fake.NewClientBuilder().WithObjects(
		secret("creds", map[string][]byte{"token": []byte(" t0k3n\n")}),
		secret("blank", map[string][]byte{"token": []byte(" \n")}),
		secret("ca", map[string][]byte{platform.DefaultCAKey: ca}),
	).Build()
	conn := func(mutate func(*platform.PoolConnection)) platform.PoolConnection {
		c := platform.PoolConnection{Namespace: "team-a", URLs: []string{"https://a.example", ""},
			InsecureURL: platform.ErrInsecureURL, Credentials: "creds", CredentialsClass: platform.ErrCredentials,
			TokenKey: "token", CABundleRef: &fleetv1.SecretKeyReference{Name: "ca"}}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	ctx := context.Background()

	t.Run("usable", func(t *testing.T) {
		g := NewWithT(t)
		s, err := conn(nil).Read(ctx, reader)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Credentials.Name).To(Equal("creds"))
		g.Expect(s.Token).To(Equal("t0k3n"))
		g.Expect(s.CAPEM).To(Equal(ca))
		g.Expect(s.CAVersion).To(Equal("uid-ca/7/" + platform.DefaultCAKey))
		tr, err := s.Transport(nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tr).NotTo(BeNil())
	})
	t.Run("no CA bundle keeps the base transport", func(t *testing.T) {
		g := NewWithT(t)
		s, err := conn(func(c *platform.PoolConnection) { c.CABundleRef = nil }).Read(ctx, reader)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.CAPEM).To(BeNil())
		g.Expect(s.CAVersion).To(BeEmpty())
		tr, err := s.Transport(nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tr).To(BeNil(), "a nil base stays nil, so the client clones its default")
	})
	t.Run("no token key wanted", func(t *testing.T) {
		g := NewWithT(t)
		s, err := conn(func(c *platform.PoolConnection) { c.Credentials, c.TokenKey = "blank", "" }).Read(ctx, reader)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Token).To(BeEmpty())
	})

	refusals := []struct {
		name    string
		mutate  func(*platform.PoolConnection)
		class   error
		message string
	}{
		{"a later endpoint is http:// and nothing is read", func(c *platform.PoolConnection) {
			c.URLs = append(c.URLs, "HTTP://agent.example")
			c.Credentials, c.CABundleRef.Name = "absent", "absent"
		}, platform.ErrInsecureURL, platform.ErrInsecureURL.Error() + ": HTTP://agent.example"},
		{"no credentials Secret, before the CA bundle", func(c *platform.PoolConnection) {
			c.Credentials, c.CABundleRef.Name = "absent", "absent"
		}, platform.ErrCredentials, "CI platform credentials: Secret team-a/absent not found"},
		{"a blank token, before the CA bundle", func(c *platform.PoolConnection) {
			c.Credentials, c.CABundleRef.Name = "blank", "absent"
		}, platform.ErrCredentials, `CI platform credentials: Secret team-a/blank has no key "token"`},
		{"no CA Secret", func(c *platform.PoolConnection) { c.CABundleRef.Name = "absent" },
			platform.ErrCABundle, "CI platform API CA bundle: Secret team-a/absent not found"},
		{"no CA key", func(c *platform.PoolConnection) { c.CABundleRef.Key = "other.pem" },
			platform.ErrCABundle, `CI platform API CA bundle: Secret team-a/ca has no key "other.pem"`},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := conn(tt.mutate).Read(ctx, reader)
			g.Expect(err).To(MatchError(tt.class))
			g.Expect(err).To(MatchError(tt.message))
		})
	}
	t.Run("http:// allowed", func(t *testing.T) {
		_, err := conn(func(c *platform.PoolConnection) { c.URLs, c.AllowInsecureHTTP = []string{"http://a.example"}, true }).Read(ctx, reader)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	})
}
