package webhook_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// TestGitLabJobHooksRoutedByTheJobsTags: a Job Hook carries no job tags, so the receiver reads
// the job through a pool that may serve it and routes it by its tags: a tagged job goes to the
// pool with those tags, an untagged one to the run_untagged pool, a manual job is held, and a
// delivery with another pool's token is refused.
func TestGitLabJobHooksRoutedByTheJobsTags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	glSecret := []byte("gitlab-hook-secret")
	h := startReceiver(t, webhook.Config{Secrets: map[platform.Kind][]byte{platform.KindGitHub: secret, platform.KindGitLab: glSecret}}, true)
	url := strings.TrimSuffix(h.url, webhook.Path) + webhook.PathPrefix + string(platform.KindGitLab)
	gl := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true, WebhookURL: url, WebhookToken: string(glSecret)})
	gl.AddProject("acme/api")
	for name, data := range map[string]map[string][]byte{
		"gitlab":    {"token": []byte(gl.AddToken(fakegitlab.ScopeCreateRunner, fakegitlab.ScopeManageRunner, fakegitlab.ScopeReadAPI))},
		"gitlab-ca": {"ca.crt": gl.CACertPEM()},
	} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns}, Data: data})).To(Succeed())
	}
	pool := func(name string, spec fleetv1.GitLabSpec) *fleetv1.RunnerPool {
		spec.URL, spec.Scope = gl.URL(), fleetv1.GitLabScope{Group: "acme"}
		spec.CredentialsRef, spec.CABundleRef = fleetv1.LocalObjectReference{Name: "gitlab"}, &fleetv1.SecretKeyReference{Name: "gitlab-ca"}
		p := builder.NewRunnerPool(name, h.ns).WithGitLab(spec).Build()
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		return p
	}
	linux := pool("linux", fleetv1.GitLabSpec{Tags: []string{"linux"}})
	untagged := pool("untagged", fleetv1.GitLabSpec{RunUntagged: true})

	tagged := gl.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	plain := gl.CreateJob("acme/api", fakegitlab.JobSpec{})
	manual := gl.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Status: fakegitlab.JobManual})
	g.Eventually(func() int { return len(gl.Deliveries()) }).WithTimeout(20 * time.Second).Should(Equal(3))
	for _, d := range gl.Deliveries() {
		g.Expect(d.StatusCode).To(BeNumerically("<", 300), d.Err)
	}
	h.waitIdle(g)
	g.Eventually(func() int { return h.snapshot(g, linux).Queued }).Should(Equal(1))
	d := h.snapshot(g, linux)
	g.Expect(d.Jobs).To(HaveKey(strconv.FormatInt(tagged.ID, 10)))
	g.Expect(d.Jobs).To(HaveKey(strconv.FormatInt(manual.ID, 10)))
	g.Expect(d.Jobs[strconv.FormatInt(manual.ID, 10)].State).To(Equal(platform.JobWaiting), "a manual job is held, not demand")
	u := h.snapshot(g, untagged)
	g.Expect(u.Queued).To(Equal(1))
	g.Expect(u.Jobs).To(HaveKey(strconv.FormatInt(plain.ID, 10)))

	// Another pool's token proves nothing here.
	gl.SetWebhook(url, "another-pools-secret")
	gl.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	g.Eventually(func() int { return len(gl.Deliveries()) }).WithTimeout(20 * time.Second).Should(Equal(4))
	g.Expect(gl.Deliveries()[3].StatusCode).To(Equal(401))
	g.Expect(h.snapshot(g, linux).Queued).To(Equal(1))
}
