package runnerpool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestGitHubOverPlainHTTP: a pool whose GitHub API URL is http:// would send the App's JWT and
// installation tokens in clear text. The API server refuses it unless allowInsecureHTTP says so
// explicitly, and then the pool reports it loudly: InsecureTransport=True (PlainHTTP) and a
// Warning Event. An https:// pool reports InsecureTransport=False.
func TestGitHubOverPlainHTTP(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, ns, _ := controllertest.StartFleet(t)
	controllertest.RunnerTemplates(t, ns)
	pool := func(name, url string, allow bool) *fleetv1.RunnerPool {
		return builder.NewRunnerPool(name, ns).WithCluster("fleet").WithBounds(0, 1).WithTemplates("runner", "runner").
			WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}, APIURL: url, AllowInsecureHTTP: allow,
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).Build()
	}

	err := controllertest.Env.Client.Create(ctx, pool("clear", "http://ghes.example.com/api/v3/", false))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "http:// without allowInsecureHTTP is refused: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("allowInsecureHTTP"))

	lab := pool("lab", "http://ghes.example.com/api/v3/", true)
	g.Expect(controllertest.Env.Client.Create(ctx, lab)).To(Succeed())
	tls := pool("tls", "https://ghes.example.com/api/v3/", false)
	g.Expect(controllertest.Env.Client.Create(ctx, tls)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := conditions.Get(controllertest.Get(g, lab), fleetv1.InsecureTransportCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleetv1.PlainHTTPReason))
		g.Expect(conditions.IsFalse(controllertest.Get(g, tls), fleetv1.InsecureTransportCondition)).To(BeTrue())
		events := &corev1.EventList{}
		g.Expect(controllertest.Env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("InvolvedObject.Name", "lab"), HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", fleetv1.PlainHTTPReason))))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestGitHubCABundle: a pool trusts only the CA bundle its caBundleRef names. A GitHub API whose
// certificate another CA signed (a man in the middle, an impostor GHES) fails the handshake: the
// pool reports GitHubAvailable=False (TLSError) and the server never sees the App's JWT or a
// token. A bundle that is not PEM is reported as CABundleInvalid, and a CA bundle with an
// http:// apiURL is refused by the API server.
func TestGitHubCABundle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	ghes := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	impostor := fakegithub.StartForTest(t, fakegithub.Options{TLS: true, AppKeyPEM: ghes.AppKeyPEM()})
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	ns := controllertest.NewNamespace(t)
	controllertest.CAPIFleet(t, ns, sim)
	controllertest.RunnerTemplates(t, ns)
	ghes.InstallationID("acme")
	impostor.InstallationID("acme")
	for name, data := range map[string]map[string][]byte{
		"github-app": {"app-id": []byte(fmt.Sprint(ghes.AppID())), "private-key": ghes.AppKeyPEM()},
		"ghes-ca":    {"ca.crt": ghes.CACertPEM()},
		"junk-ca":    {"ca.crt": []byte("not a certificate")},
	} {
		g.Expect(controllertest.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data})).To(Succeed())
	}
	pool := func(name, url, ca string) *fleetv1.RunnerPool {
		return builder.NewRunnerPool(name, ns).WithCluster("fleet").WithBounds(0, 1).WithTemplates("runner", "runner").
			WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Labels: []string{name}, APIURL: url,
				CABundleRef:    &fleetv1.SecretKeyReference{Name: ca},
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).Build()
	}

	err := controllertest.Env.Client.Create(ctx, pool("clear", "http://ghes.example.com/api/v3/", "ghes-ca"))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a CA bundle with http:// is refused: %v", err)

	trusted := pool("trusted", ghes.URL()+"/", "ghes-ca")
	mitm := pool("mitm", impostor.URL()+"/", "ghes-ca")
	junk := pool("junk", ghes.URL()+"/", "junk-ca")
	for _, p := range []*fleetv1.RunnerPool{trusted, mitm, junk} {
		g.Expect(controllertest.Env.Client.Create(ctx, p)).To(Succeed())
	}

	g.Eventually(func(g Gomega) {
		for _, tt := range []struct {
			pool   *fleetv1.RunnerPool
			status metav1.ConditionStatus
			reason string
		}{
			{trusted, metav1.ConditionTrue, fleetv1.PlatformAvailableReason},
			{mitm, metav1.ConditionFalse, fleetv1.TLSErrorReason},
			{junk, metav1.ConditionFalse, fleetv1.CABundleInvalidReason},
		} {
			p := controllertest.Get(g, tt.pool)
			c := conditions.Get(p, fleetv1.PlatformAvailableCondition)
			g.Expect(c).NotTo(BeNil(), tt.pool.Name)
			g.Expect(c.Status).To(Equal(tt.status), "%s: %s", tt.pool.Name, c.Message)
			g.Expect(c.Reason).To(Equal(tt.reason), "%s: %s", tt.pool.Name, c.Message)
			g.Expect(conditions.IsFalse(p, fleetv1.InsecureTransportCondition)).To(BeTrue(), tt.pool.Name)
		}
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(impostor.CredentialedRequests()).To(BeZero(), "no JWT or token reached the impostor")
	g.Expect(impostor.RequestCounts()).To(BeEmpty())
	g.Expect(ghes.CredentialedRequests()).To(BeNumerically(">", 0), "the trusted pool did talk to GitHub")
}
