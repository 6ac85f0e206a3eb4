package runnerpool_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// repairGitLabPool creates a fleet on sim and a RunnerPool of gl's group, with the token and CA
// bundle it needs in ns.
func repairGitLabPool(t *testing.T, ns, group string, sim *pvesim.Simulator, gl *fakegitlab.Server, spec fleetv1.GitLabSpec) *fleetv1.RunnerPool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.CAPIFleet(t, ns, sim)
	controllertest.RunnerTemplates(t, ns)
	mct := controllertest.Get(g, &infrav1.MachineClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})
	small := client.MergeFrom(mct.DeepCopy())
	mct.Spec.Template.Spec.MemoryMiB = 512
	g.Expect(controllertest.Env.Client.Patch(ctx, mct, small)).To(Succeed())
	token := gl.AddToken(fakegitlab.ScopeCreateRunner, fakegitlab.ScopeManageRunner, fakegitlab.ScopeReadAPI)
	g.Expect(controllertest.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitlab", Namespace: ns},
		StringData: map[string]string{"token": token}})).To(Succeed())
	g.Expect(controllertest.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitlab-ca", Namespace: ns},
		Data: map[string][]byte{"ca.crt": gl.CACertPEM()}})).To(Succeed())
	spec.URL, spec.Scope = gl.URL(), fleetv1.GitLabScope{Group: group}
	spec.CredentialsRef = fleetv1.LocalObjectReference{Name: "gitlab"}
	spec.CABundleRef = &fleetv1.SecretKeyReference{Name: "gitlab-ca"}
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, 3).WithGitLab(spec).
		WithTemplates("runner", "runner").Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	return pool
}

// repairLedgerState is the state the pool's job ledger holds for a job, "" when it holds none.
func repairLedgerState(g Gomega, pool *fleetv1.RunnerPool, jobID int64) string {
	cm := &corev1.ConfigMap{}
	if err := controllertest.Env.Client.Get(context.Background(), demand.ConfigMapKey(pool), cm); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return ""
	}
	raw := cm.Data[fmt.Sprint(jobID)]
	if _, rest, ok := strings.Cut(raw, `"s":"`); ok {
		state, _, _ := strings.Cut(rest, `"`)
		return state
	}
	return ""
}

// TestForgedDeliveriesDoNotHideQueuedJobs plays whoever holds the GitLab receiver's token: every
// maintainer who points a project or group webhook at HyperFleet has it, and job IDs are
// sequential. A signed Job Hook says a victim's job is done (or running) just before GitLab
// releases it to runners; the attacker repeats it all along. Before, the ledger only moved forward
// and the repair had no case for it, so the job never got a runner. Now the repair's listing,
// which shows the job pending, wins: the pool creates a runner, and the job runs on it.
//
// In the last case the forged delivery names the attacker's own project, so the receiver claims
// the victim's job for the attacker's pool (untagged, and its token proves the same instance)
// before the victim's pool has seen it; the victim's repair takes the claim back, since the
// attacker's pool cannot serve a job of the victim's group.
func TestForgedDeliveriesDoNotHideQueuedJobs(t *testing.T) {
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gl := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	addr, token := controllertest.FreeAddr(t), "shared-by-every-maintainer"
	url := fmt.Sprintf("http://%s/webhooks/gitlab", addr)
	gl.SetWebhook(url, token)
	controllertest.StartManagerWith(t, func(c *config.Manager) {
		c.WebhookBindAddress, c.WebhookSecrets, c.RepairInterval = addr, map[platform.Kind]string{platform.KindGitLab: token}, time.Second
	})

	for _, tt := range []struct {
		name   string
		forged fakegitlab.JobStatus
		hijack bool
	}{
		{name: "completed", forged: fakegitlab.JobSuccess},
		{name: "running", forged: fakegitlab.JobRunning},
		{name: "claimed for the attackers pool", forged: fakegitlab.JobSuccess, hijack: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			group := "victims-" + strings.ReplaceAll(tt.name, " ", "-")
			gl.AddProject(group + "/app")
			attackers := "attackers-" + strings.ReplaceAll(tt.name, " ", "-")
			gl.AddProject(attackers + "/app")

			// The first pool is live (its first repair ran) before the hook: a delivery for a pool
			// the manager has not reconciled yet has nowhere to go.
			var victim, attacker *fleetv1.RunnerPool
			first := &victim
			if tt.hijack {
				attacker = repairGitLabPool(t, controllertest.NewNamespace(t), attackers, sim, gl, fleetv1.GitLabSpec{RunUntagged: true})
				first = &attacker
			} else {
				victim = repairGitLabPool(t, controllertest.NewNamespace(t), group, sim, gl, fleetv1.GitLabSpec{Tags: []string{"linux"}})
			}
			g.Eventually(func(g Gomega) {
				g.Expect(controllertest.Get(g, *first).Status.LastRepairTime).NotTo(BeNil())
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

			// The job waits for an earlier stage; the attacker sends its hook ahead of its release.
			job := gl.CreateJob(group+"/app", fakegitlab.JobSpec{Tags: []string{"linux"}, Status: fakegitlab.JobCreated})
			forged, ok := gl.JobHook(job.ID, tt.forged)
			g.Expect(ok).To(BeTrue())
			if tt.hijack {
				forged = []byte(strings.ReplaceAll(string(forged), group+"/app", attackers+"/app"))
			}
			send := func() {
				code, err := fakegitlab.PostJobHook(ctx, http.DefaultClient, url, token, gl.URL(), forged)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(BeNumerically("<", 300), "the forged hook carries the right token")
			}
			send()
			recordedIn := victim
			if tt.hijack {
				recordedIn = attacker
			}
			g.Eventually(func(g Gomega) string { return repairLedgerState(g, recordedIn, job.ID) },
				20*time.Second, 100*time.Millisecond).Should(BeElementOf("completed", "in_progress"))
			if tt.hijack {
				victim = repairGitLabPool(t, controllertest.NewNamespace(t), group, sim, gl, fleetv1.GitLabSpec{Tags: []string{"linux"}})
			}
			before := map[string]bool{}
			for _, m := range controllertest.PoolMachines(g, victim) {
				before[m.Name] = true
			}

			// GitLab releases the job; the attacker keeps saying it is done (or running).
			g.Expect(gl.SetJobStatus(job.ID, fakegitlab.JobPending)).To(BeTrue())
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(500 * time.Millisecond):
						_, _ = fakegitlab.PostJobHook(ctx, http.DefaultClient, url, token, gl.URL(), forged)
					}
				}
			}()

			// The runner of a Machine the pool creates for the job takes it, as its VM's would.
			var machine string
			g.Eventually(func(g Gomega) {
				for _, m := range controllertest.PoolMachines(g, victim) {
					if !before[m.Name] && m.DeletionTimestamp.IsZero() {
						machine = m.Name
					}
				}
				g.Expect(machine).NotTo(BeEmpty())
			}, 90*time.Second, 250*time.Millisecond).Should(Succeed(), "the pool creates a runner for the job GitLab lists as pending")
			groupID := gl.AddGroup(group).ID
			runner := gl.AddRunner(fakegitlab.Runner{Type: fakegitlab.GroupType, GroupID: groupID,
				Description: "HyperFleet runner " + machine, Tags: []string{"linux"}})
			rc := fakegitlab.RunnerClient{URL: gl.URL(), Token: runner.Token, HTTP: gl.HTTPClient()}
			taken, err := rc.RequestJob(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(taken).NotTo(BeNil())
			g.Expect(taken.ID).To(Equal(job.ID))
			g.Expect(rc.UpdateJob(ctx, taken, "success")).To(Succeed())
			done, _ := gl.GetJob(job.ID)
			g.Expect(done.Status).To(Equal(fakegitlab.JobSuccess))
			g.Expect(done.RunnerDescription).To(HaveSuffix(machine), "the job ran on the pool's runner")
		})
	}
}
