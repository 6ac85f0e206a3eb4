package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestGitHubOverPlainHTTP: a pool whose GitHub API URL is http:// would send the App's JWT and
// installation tokens in clear text. The API server refuses it unless allowInsecureHTTP says so
// explicitly, and then the pool reports it loudly: InsecureTransport=True (PlainHTTP) and a
// Warning Event. An https:// pool reports InsecureTransport=False.
func TestGitHubOverPlainHTTP(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	capiFleet(t, ns, sim)
	runnerTemplates(t, ns)
	pool := func(name, url string, allow bool) *fleetv1.RunnerPool {
		return builder.NewRunnerPool(name, ns).WithCluster("fleet").WithBounds(0, 1).WithTemplates("runner", "runner").
			WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}, APIURL: url, AllowInsecureHTTP: allow,
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).Build()
	}

	err := env.Client.Create(ctx, pool("clear", "http://ghes.example.com/api/v3/", false))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "http:// without allowInsecureHTTP is refused: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("allowInsecureHTTP"))

	lab := pool("lab", "http://ghes.example.com/api/v3/", true)
	g.Expect(env.Client.Create(ctx, lab)).To(Succeed())
	tls := pool("tls", "https://ghes.example.com/api/v3/", false)
	g.Expect(env.Client.Create(ctx, tls)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := conditions.Get(get(g, lab), fleetv1.InsecureTransportCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleetv1.PlainHTTPReason))
		g.Expect(conditions.IsFalse(get(g, tls), fleetv1.InsecureTransportCondition)).To(BeTrue())
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("InvolvedObject.Name", "lab"), HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", fleetv1.PlainHTTPReason))))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
