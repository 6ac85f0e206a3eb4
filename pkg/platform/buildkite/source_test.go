package buildkite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
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

func (s secrets) add(name, key string, value []byte) {
	s[client.ObjectKey{Namespace: "team-a", Name: name}] = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Data:       map[string][]byte{key: value}}
}

func buildkitePool(s *fakebuildkite.Server) *fleetv1.RunnerPool {
	return &fleetv1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "linux", UID: "pool-uid-1"},
		Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{Buildkite: &fleetv1.BuildkiteSpec{
			Organization: s.Organization(), Cluster: s.ClusterID(), Queue: "linux", Tags: []string{"os=linux"},
			CredentialsRef: fleetv1.LocalObjectReference{Name: "buildkite"}, APIURL: s.URL(), AgentEndpoint: s.AgentEndpoint(),
			CABundleRef: &fleetv1.SecretKeyReference{Name: "buildkite-ca"},
		}}},
	}
}

// TestSourceServesAPool: the registered driver builds the pool's platform from its spec and
// Secrets, registers a VM, lists and removes its token, reports demand the seam's routing
// serves, and parses the fake's own signed webhooks.
func TestSourceServesAPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	sec := secrets{}
	sec.add("buildkite", buildkite.KeyToken, []byte(s.AddAPIToken(leastPrivilege...)+"\n"))
	sec.add("buildkite-ca", buildkite.DefaultCAKey, s.CACertPEM())
	src, err := platform.NewSource(platform.Inputs{Reader: sec})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(platform.Registered()).To(ContainElement(platform.KindBuildkite))
	pool := buildkitePool(s)

	p, scope, err := src.Platform(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Kind()).To(Equal(platform.KindBuildkite))
	g.Expect(scope).To(Equal(platform.Scope{Organization: "acme"}))

	mark := platform.PoolRunnerLabel(string(pool.UID))
	reg, err := p.Register(ctx, scope, platform.RunnerSpec{Name: "linux-x7k2q", Labels: []string{"queue=linux", "os=linux", "size=large", mark}})
	g.Expect(err).NotTo(HaveOccurred())
	var cfg buildkite.AgentConfig
	g.Expect(json.Unmarshal([]byte(reg.Config), &cfg)).To(Succeed())
	g.Expect(cfg.Endpoint).To(Equal(s.AgentEndpoint()))
	g.Expect(cfg.Tags).To(Equal([]string{"os=linux", "queue=linux", "size=large"}))
	g.Expect(cfg.CA).To(Equal(string(s.CACertPEM())), "the VM trusts the pool's CA for the agent endpoint")
	g.Expect(s.ClusterTokens()).To(ConsistOf(And(HaveField("ID", reg.ID), HaveField("Value", cfg.Token))))

	runners, err := p.ListRunners(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runners).To(ConsistOf(platform.Runner{ID: reg.ID, Name: "linux-x7k2q", Labels: []string{mark}, Status: platform.RunnerOffline}))
	g.Expect(p.RemoveRunnerByName(ctx, scope, "linux-x7k2q")).To(Succeed())
	g.Expect(s.ClusterTokens()).To(BeEmpty())
	g.Expect(p.RemoveRunner(ctx, scope, reg.ID)).To(Succeed(), "already gone")

	scheduled := s.CreateJob("api", []string{"queue=linux", "os=linux"})
	s.CreateJob("api", []string{"queue=linux"}, fakebuildkite.WithState(fakebuildkite.JobLimited))
	s.CreateJob("api", []string{"queue=macos"})
	s.CreateJob("api", nil)
	jobs, err := p.QueuedJobs(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(4))
	neutral, ok := platform.PoolOf(pool)
	g.Expect(ok).To(BeTrue())
	var served []platform.Job
	for _, j := range jobs {
		g.Expect(scope.Contains(j.Repository)).To(BeTrue(), j.Repository)
		if neutral.Serves(j.Labels) {
			served = append(served, j)
		}
	}
	g.Expect(served).To(HaveLen(2), "the scheduled and the held job of queue linux")
	g.Expect(served).To(ContainElement(And(HaveField("ID", scheduled.ID), HaveField("State", platform.JobQueued),
		HaveField("Repository", "acme/api"), HaveField("Labels", []string{"os=linux", "queue=linux"}))))
	g.Expect(served).To(ContainElement(HaveField("State", platform.JobWaiting)))
	g.Expect(jobs).To(ContainElement(HaveField("Labels", []string{"queue=default"})))
	got, err := p.GetJob(ctx, scope, scheduled.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.State).To(Equal(platform.JobQueued))
	_, err = p.GetJob(ctx, scope, "no-such-job")
	g.Expect(err).To(MatchError(platform.ErrNotFound))

	// The receiver's route parses the fake's signed deliveries with no pool at hand.
	d, ok := platform.Lookup(platform.KindBuildkite)
	g.Expect(ok).To(BeTrue())
	hooks := make(chan platform.Webhook, 8)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := d.Webhooks.ParseWebhook(r.Header, body, []byte("hook-token"))
		w.WriteHeader(platform.WebhookHTTPStatus(err))
		if err == nil {
			hooks <- wh
		}
	}))
	defer recv.Close()
	s.SetWebhook(recv.URL, "hook-token", true)
	job := s.CreateJob("web", []string{"queue=linux"})
	select {
	case wh := <-hooks:
		g.Expect(wh.Kind).To(Equal(platform.WebhookJob))
		g.Expect(wh.Job.JobID).To(Equal(job.ID))
		g.Expect(wh.Job.State).To(Equal(platform.JobQueued))
		g.Expect(wh.Job.Installation).To(Equal("acme"))
		g.Expect(wh.Job.Repository).To(Equal("acme/web"))
		g.Expect(neutral.Serves(wh.Job.Labels)).To(BeTrue())
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook")
	}
	s.SetWebhook(recv.URL, "a-token-the-receiver-does-not-hold", true)
	s.CreateJob("web", []string{"queue=linux"})
	g.Eventually(s.Deliveries).WithTimeout(5 * time.Second).Should(ContainElement(HaveField("StatusCode", http.StatusUnauthorized)))
	g.Consistently(hooks).WithTimeout(200 * time.Millisecond).ShouldNot(Receive())
}

// TestInstallationIsProven: the organization is what Buildkite confirms for the token, once
// per ProofTTL; a token of another organization is refused, and the refusal is remembered.
func TestInstallationIsProven(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	elsewhere := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true, Organization: "globex"})
	sec := secrets{}
	sec.add("buildkite", buildkite.KeyToken, []byte(s.AddAPIToken(leastPrivilege...)))
	sec.add("buildkite-ca", buildkite.DefaultCAKey, s.CACertPEM())
	src := buildkite.NewSource(platform.Inputs{Reader: sec})
	pool := buildkitePool(s)
	for range 3 {
		org, err := src.Installation(ctx, pool)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(org).To(Equal("acme"))
	}
	g.Expect(s.Requests(fakebuildkite.EndpointGetCluster)).To(Equal(1))

	// A spec that claims acme with globex's token: globex's Buildkite does not know acme.
	sec.add("stolen", buildkite.KeyToken, []byte(elsewhere.AddAPIToken(leastPrivilege...)))
	sec.add("globex-ca", buildkite.DefaultCAKey, elsewhere.CACertPEM())
	liar := buildkitePool(elsewhere)
	liar.Spec.Platform.Buildkite.Organization = "acme"
	liar.Spec.Platform.Buildkite.CredentialsRef.Name = "stolen"
	liar.Spec.Platform.Buildkite.CABundleRef.Name = "globex-ca"
	for range 3 {
		_, err := src.Installation(ctx, liar)
		g.Expect(err).To(MatchError(platform.ErrNotFound))
	}
	g.Expect(elsewhere.Requests(fakebuildkite.EndpointGetCluster)).To(Equal(1), "the refusal is remembered")
}

// TestSourceRefusesUnusableConfiguration: nothing is sent without usable credentials, a CA
// bundle that is there, and HTTPS (unless the pool allows plain HTTP).
func TestSourceRefusesUnusableConfiguration(t *testing.T) {
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	full := func() secrets {
		sec := secrets{}
		sec.add("buildkite", buildkite.KeyToken, []byte(s.AddAPIToken(leastPrivilege...)))
		sec.add("buildkite-ca", buildkite.DefaultCAKey, s.CACertPEM())
		return sec
	}
	tests := []struct {
		name   string
		edit   func(*fleetv1.BuildkiteSpec, secrets)
		expect error
	}{
		{"no credentials Secret", func(_ *fleetv1.BuildkiteSpec, sec secrets) {
			delete(sec, client.ObjectKey{Namespace: "team-a", Name: "buildkite"})
		}, platform.ErrCredentials},
		{"no token key", func(_ *fleetv1.BuildkiteSpec, sec secrets) { sec.add("buildkite", "api-token", []byte("x")) }, platform.ErrCredentials},
		{"no CA Secret", func(spec *fleetv1.BuildkiteSpec, _ secrets) { spec.CABundleRef.Name = "missing" }, platform.ErrCABundle},
		{"CA is not a certificate", func(_ *fleetv1.BuildkiteSpec, sec secrets) {
			sec.add("buildkite-ca", buildkite.DefaultCAKey, []byte("not pem"))
		}, platform.ErrCABundle},
		{"plain HTTP", func(spec *fleetv1.BuildkiteSpec, _ secrets) { spec.APIURL = "http://127.0.0.1:1" }, platform.ErrInsecureURL},
		{"a server the CA does not vouch for", func(spec *fleetv1.BuildkiteSpec, sec secrets) {
			sec.add("buildkite-ca", buildkite.DefaultCAKey, fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true}).CACertPEM())
		}, platform.ErrTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sec := full()
			pool := buildkitePool(s)
			tt.edit(pool.Spec.Platform.Buildkite, sec)
			src := buildkite.NewSource(platform.Inputs{Reader: sec})
			before := s.Requests(fakebuildkite.EndpointGetCluster)
			_, err := src.Installation(ctx, pool)
			g.Expect(err).To(MatchError(tt.expect))
			g.Expect(s.Requests(fakebuildkite.EndpointGetCluster)).To(Equal(before), "nothing reached Buildkite")
		})
	}
}

// TestPoolsDoNotShareAClientAcrossFieldBoundaries: two pools of one Secret whose apiURL and
// agentEndpoint read the same once joined ("<api>|<agent>") are different configurations. The
// second must be built from its own settings, not handed the first's client (whose agent
// endpoint and proof are the first pool's).
func TestPoolsDoNotShareAClientAcrossFieldBoundaries(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	sec := secrets{}
	sec.add("buildkite", buildkite.KeyToken, []byte(s.AddAPIToken(leastPrivilege...)))
	sec.add("buildkite-ca", buildkite.DefaultCAKey, s.CACertPEM())
	src := buildkite.NewSource(platform.Inputs{Reader: sec})

	first := buildkitePool(s)
	first.Spec.Platform.Buildkite.AgentEndpoint = s.AgentEndpoint() + "|edge"
	p1, _, err := src.Platform(ctx, first)
	g.Expect(err).NotTo(HaveOccurred())

	second := buildkitePool(s)
	second.UID = "pool-uid-2"
	second.Spec.Platform.Buildkite.APIURL = s.URL() + "|" + s.AgentEndpoint()
	second.Spec.Platform.Buildkite.AgentEndpoint = "edge"
	p2, _, err := src.Platform(ctx, second)
	if err == nil {
		g.Expect(p2.(*buildkite.Platform).Client).NotTo(BeIdenticalTo(p1.(*buildkite.Platform).Client),
			"the second pool was handed the first pool's client")
	}
}
