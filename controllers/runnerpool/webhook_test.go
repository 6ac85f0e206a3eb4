package runnerpool_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestWebhooksScaleThePool sends GitHub's signed workflow_job deliveries to the manager's receiver:
// queued jobs grow the pool, a forged delivery is refused and changes nothing.
func TestWebhooksScaleThePool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	addr, secret := controllertest.FreeAddr(t), "webhook-secret"
	controllertest.StartManagerWith(t, func(c *config.Manager) {
		c.WebhookBindAddress, c.WebhookSecrets = addr, map[platform.Kind]string{platform.KindGitHub: secret}
	})
	url := fmt.Sprintf("http://%s/webhooks/github", addr)
	gh := fakegithub.StartForTest(t, fakegithub.Options{WebhookURL: url, WebhookSecret: secret, TLS: true})

	ns := controllertest.NewNamespace(t)
	controllertest.CAPIFleet(t, ns, sim)
	controllertest.RunnerTemplates(t, ns)
	g.Expect(controllertest.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"app-id": fmt.Sprint(gh.AppID()), "private-key": string(gh.AppKeyPEM())}})).To(Succeed())
	// An organization of its own: jobs are routed to one pool across all namespaces, and other
	// tests leave pools for "acme" behind. The pool's credentials hold the App's installation on
	// "hooks", which the deliveries name.
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, 10).
		WithGitHub(fleetv1.GitHubSpec{Organization: "hooks", Labels: []string{"linux"}, APIURL: gh.URL() + "/", CABundleRef: controllertest.GitHubCA(t, ns, gh),
			CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).
		WithTemplates("runner", "runner").Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.Selector).NotTo(BeEmpty())
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
		got := controllertest.Get(g, pool)
		g.Expect(got.Status.QueuedJobs).To(Equal(int32(3)))
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(3))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(3), "the forged delivery and duplicates add nothing")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestOneJobOneMachineAcrossNamespaces: two teams' pools in two namespaces hold the same GitHub
// App installation and both match a job. Exactly one Machine is created for it, whether the
// webhook or a pool's repair loop sees the job first: the first to see it claims it cluster-wide,
// and the other path follows the claim.
func TestOneJobOneMachineAcrossNamespaces(t *testing.T) {
	for _, order := range []string{"webhook first", "repair first"} {
		t.Run(order, func(t *testing.T) {
			g := NewWithT(t)
			controllertest.StartCAPI(t)
			sim := pvesim.StartForTest(t, pvesim.Config{})
			addr, secret := controllertest.FreeAddr(t), "one-job"
			url := fmt.Sprintf("http://%s/webhooks/github", addr)
			gh := fakegithub.StartForTest(t, fakegithub.Options{WebhookURL: url, WebhookSecret: secret, TLS: true})
			controllertest.StartManagerWith(t, func(c *config.Manager) {
				c.WebhookBindAddress, c.WebhookSecrets, c.RepairInterval = addr, map[platform.Kind]string{platform.KindGitHub: secret}, time.Second
			})
			org := "onejob" + strings.ReplaceAll(order, " ", "")
			pools := []*fleetv1.RunnerPool{
				controllertest.GitHubPool(t, controllertest.NewNamespace(t), org, 10, sim, gh),
				controllertest.GitHubPool(t, controllertest.NewNamespace(t), org, 10, sim, gh),
			}
			// Each pool has repaired once, so the next repair is a second away.
			g.Eventually(func(g Gomega) {
				for _, p := range pools {
					g.Expect(controllertest.Get(g, p).Status.LastRepairTime).NotTo(BeNil())
				}
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

			machines := func(g Gomega) int {
				n := 0
				for _, p := range pools {
					n += len(controllertest.PoolMachines(g, p))
				}
				return n
			}
			labels := []string{"self-hosted", "linux"}
			if order == "webhook first" {
				gh.CreateJob(org+"/app", labels)
			} else {
				job := gh.CreateJob(org+"/app", labels, fakegithub.WithoutQueuedWebhook())
				g.Eventually(func(g Gomega) { g.Expect(machines(g)).To(Equal(1)) }, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "a repair loop found the job")
				g.Expect(gh.DeliverJobWebhook(job.ID)).To(Succeed())
				g.Eventually(func() int { return len(gh.Deliveries()) }, 10*time.Second, 100*time.Millisecond).Should(Equal(1))
			}
			g.Eventually(func(g Gomega) { g.Expect(machines(g)).To(Equal(1)) }, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			g.Consistently(func(g Gomega) {
				g.Expect(machines(g)).To(Equal(1), "one job, one Machine, across both namespaces")
			}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
		})
	}
}

// TestHeldJobBootsNoVMUntilApproved: GitHub sends workflow_job with action "waiting" for a job an
// environment's protection rules hold (its documented payload, with a deployment). It is not
// demand: no Machine and no VM appear while it waits for approval. The approval's "queued"
// delivery of the same job then boots one.
func TestHeldJobBootsNoVMUntilApproved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	addr, secret := controllertest.FreeAddr(t), "held-secret"
	controllertest.StartManagerWith(t, func(c *config.Manager) {
		c.WebhookBindAddress, c.WebhookSecrets, c.RepairInterval = addr, map[platform.Kind]string{platform.KindGitHub: secret}, time.Hour
	})
	url := fmt.Sprintf("http://%s/webhooks/github", addr)
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "held", 5, sim, gh)
	g.Eventually(func(g Gomega) { g.Expect(controllertest.Get(g, pool).Status.Selector).NotTo(BeEmpty()) }, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	raw, err := os.ReadFile("testdata/workflow_job_waiting.json")
	g.Expect(err).NotTo(HaveOccurred())
	waiting := strings.NewReplacer("HOLD_ORG", "held", "HOLD_INSTALLATION", fmt.Sprint(gh.InstallationID("held"))).Replace(string(raw))
	code, err := fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte(secret), "workflow_job", fakegithub.NewDeliveryID(), []byte(waiting))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted))
	// GitHub's own example of such a job also comes as action "queued" with status "waiting".
	queuedWaiting := strings.Replace(waiting, `"action": "waiting"`, `"action": "queued"`, 1)
	code, err = fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte(secret), "workflow_job", fakegithub.NewDeliveryID(), []byte(queuedWaiting))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.QueuedJobs).To(BeZero())
		g.Expect(controllertest.PoolMachines(g, pool)).To(BeEmpty(), "a job held for approval boots no VM")
		g.Expect(controllertest.OwnedVMs(sim)).To(BeEmpty())
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())

	// Approved: GitHub queues the job for runners.
	queued := strings.Replace(strings.Replace(waiting, `"action": "waiting"`, `"action": "queued"`, 1), `"status": "waiting"`, `"status": "queued"`, 1)
	code, err = fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte(secret), "workflow_job", fakegithub.NewDeliveryID(), []byte(queued))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.QueuedJobs).To(Equal(int32(1)))
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(1))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	// A late redelivery of "waiting" does not take the demand back.
	code, err = fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte(secret), "workflow_job", fakegithub.NewDeliveryID(), []byte(waiting))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.QueuedJobs).To(Equal(int32(1)))
	}, 2*time.Second, 250*time.Millisecond).Should(Succeed())
}
