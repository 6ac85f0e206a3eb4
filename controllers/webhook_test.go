package controllers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestWebhooksScaleThePool sends GitHub's signed workflow_job deliveries to the manager's receiver:
// queued jobs grow the pool, a forged delivery is refused and changes nothing.
func TestWebhooksScaleThePool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	addr, secret := freeAddr(t), "webhook-secret"
	startManagerWith(t, func(c *config.Manager) { c.WebhookBindAddress, c.WebhookSecret = addr, secret })
	url := fmt.Sprintf("http://%s/webhooks/github", addr)
	gh := fakegithub.StartForTest(t, fakegithub.Options{WebhookURL: url, WebhookSecret: secret})

	ns := newNamespace(t)
	capiFleet(t, ns, sim)
	runnerTemplates(t, ns)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"app-id": "1", "private-key": string(gh.AppKeyPEM())}})).To(Succeed())
	// An organization of its own: jobs are routed to one pool across all namespaces, and other
	// tests leave pools for "acme" behind.
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, 10).
		WithGitHub(fleetv1.GitHubSpec{Organization: "hooks", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).
		WithTemplates("runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, pool).Status.Selector).NotTo(BeEmpty())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// A forged delivery: 401 and no demand.
	body := []byte(`{"action":"queued","workflow_job":{"id":999,"run_id":1,"labels":["self-hosted","linux"]},"repository":{"full_name":"hooks/app","owner":{"login":"hooks"}},"organization":{"login":"hooks"}}`)
	code, err := fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte("not-the-secret"), "workflow_job", fakegithub.NewDeliveryID(), body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusUnauthorized))

	for range 3 {
		gh.CreateJob("hooks/app", []string{"self-hosted", "linux"})
	}
	g.Eventually(func(g Gomega) {
		got := get(g, pool)
		g.Expect(got.Status.QueuedJobs).To(Equal(int32(3)))
		g.Expect(poolMachines(g, pool)).To(HaveLen(3))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(poolMachines(g, pool)).To(HaveLen(3), "the forged delivery and duplicates add nothing")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
