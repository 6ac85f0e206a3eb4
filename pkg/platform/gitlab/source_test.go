package gitlab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
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
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
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

func gitlabPool(s *fakegitlab.Server, uid string, scope fleetv1.GitLabScope, access fleetv1.GitLabAccessLevel) *fleetv1.RunnerPool {
	return &fleetv1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "linux-" + uid, UID: types.UID(uid)},
		Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{GitLab: &fleetv1.GitLabSpec{
			URL: s.URL(), Scope: scope, Tags: []string{"Linux"}, AccessLevel: access,
			CredentialsRef: fleetv1.LocalObjectReference{Name: "gitlab"},
			CABundleRef:    &fleetv1.SecretKeyReference{Name: "gitlab-ca"},
		}}},
	}
}

// hookLog records what the registered driver's parser makes of the fake's Job Hooks.
type hookLog struct {
	mu     sync.Mutex
	parser platform.WebhookParser
	events []platform.JobEvent
}

func (h *hookLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	wh, err := h.parser.ParseWebhook(r.Header, body, []byte(hookSecret))
	if err != nil {
		http.Error(w, err.Error(), platform.WebhookHTTPStatus(err))
		return
	}
	if wh.Kind == platform.WebhookJob {
		h.mu.Lock()
		h.events = append(h.events, *wh.Job)
		h.mu.Unlock()
	}
}

func (h *hookLog) states(jobID string) []platform.JobState {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []platform.JobState
	for _, e := range h.events {
		if e.JobID == jobID {
			out = append(out, e.State)
		}
	}
	return out
}

// TestSourceServesAPool: the registered driver builds a group pool's platform from its spec and
// Secrets, proves the instance, registers a VM whose one-time config runs exactly the job its
// tags allow, lists and removes the runner, reports demand and held jobs the seam's routing
// serves, and its parser follows the fake's Job Hooks.
func TestSourceServesAPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d, ok := platform.Lookup(platform.KindGitLab)
	g.Expect(ok).To(BeTrue(), "pkg/platform/all registers GitLab")
	hooks := &hookLog{parser: d.Webhooks}
	recv := httptest.NewServer(hooks)
	t.Cleanup(recv.Close)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true, WebhookURL: recv.URL, WebhookToken: hookSecret})
	s.AddProject("acme/platform/api")
	s.AddProject("acme/other")
	sec := secrets{}
	sec.add("gitlab", gitlab.KeyToken, []byte(s.AddToken(leastPrivilege...)+"\n"))
	sec.add("gitlab-ca", gitlab.DefaultCAKey, s.CACertPEM())
	src, err := platform.NewSource(platform.Inputs{Reader: sec})
	g.Expect(err).NotTo(HaveOccurred())
	pool := gitlabPool(s, "pool-uid-1", fleetv1.GitLabScope{Group: "acme/platform"}, fleetv1.GitLabNotProtected)

	p, scope, err := src.Platform(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Kind()).To(Equal(platform.KindGitLab))
	g.Expect(scope).To(Equal(platform.Scope{Organization: "acme/platform"}))
	inst, err := src.Installation(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst).To(Equal(s.URL()[len("https://"):]))

	build := s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "feature"})
	held := s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Status: fakegitlab.JobManual})
	s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"macos"}})
	s.CreateJob("acme/other", fakegitlab.JobSpec{Tags: []string{"linux"}})
	jobs, err := p.QueuedJobs(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(3))
	neutral, ok := platform.PoolOf(pool)
	g.Expect(ok).To(BeTrue())
	var served []platform.Job
	for _, j := range jobs {
		g.Expect(scope.Contains(j.Repository)).To(BeTrue(), j.Repository)
		if neutral.Serves(j.Labels) {
			served = append(served, j)
		}
	}
	buildID, heldID := fmt.Sprint(build.ID), fmt.Sprint(held.ID)
	g.Expect(served).To(ConsistOf(
		And(HaveField("ID", buildID), HaveField("State", platform.JobQueued), HaveField("Repository", "acme/platform/api"),
			HaveField("Labels", []string{"linux"})),
		And(HaveField("ID", heldID), HaveField("State", platform.JobWaiting))))

	mark := platform.PoolRunnerLabel(string(pool.UID))
	reg, err := p.Register(ctx, scope, platform.RunnerSpec{Name: "linux-x7k2q", Labels: append(neutral.Labels, mark)})
	g.Expect(err).NotTo(HaveOccurred())
	var cfg gitlab.RunnerConfig
	g.Expect(json.Unmarshal([]byte(reg.Config), &cfg)).To(Succeed())
	g.Expect(cfg.URL).To(Equal(s.URL()))
	g.Expect(cfg.CA).To(Equal(string(s.CACertPEM())), "the VM's runner trusts the pool's CA")
	g.Expect(s.Runners()).To(ConsistOf(And(HaveField("Description", "HyperFleet runner linux-x7k2q"),
		HaveField("Tags", ConsistOf("linux", mark)), HaveField("Type", fakegitlab.GroupType))))

	vm := &fakegitlab.RunnerClient{URL: cfg.URL, Token: cfg.Token, HTTP: s.HTTPClient()}
	job, err := vm.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fmt.Sprint(job.ID)).To(Equal(buildID))
	g.Expect(vm.UpdateJob(ctx, job, "success")).To(Succeed())
	got, err := p.GetJob(ctx, platform.Scope{Repository: "acme/platform/api"}, buildID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.State).To(Equal(platform.JobCompleted))
	g.Expect(got.RunnerName).To(Equal("linux-x7k2q"))
	_, err = p.GetJob(ctx, scope, buildID)
	g.Expect(err).To(MatchError(platform.ErrInvalid), "a job is read through its project")
	g.Eventually(func() []platform.JobState { return hooks.states(buildID) }).Should(Equal(
		[]platform.JobState{platform.JobQueued, platform.JobInProgress, platform.JobCompleted}))
	g.Eventually(func() []platform.JobState { return hooks.states(heldID) }).Should(Equal([]platform.JobState{platform.JobWaiting}))
	hooks.mu.Lock()
	for _, e := range hooks.events {
		g.Expect(e.Installation).To(Equal(inst), "a delivery names the installation the pool proved")
		g.Expect(e.Organization).To(Equal("acme"))
	}
	hooks.mu.Unlock()

	runners, err := p.ListRunners(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runners).To(ConsistOf(And(HaveField("ID", reg.ID), HaveField("Name", "linux-x7k2q"), HaveField("Labels", []string{mark}))))
	g.Expect(p.RemoveRunner(ctx, scope, reg.ID)).To(Succeed())
	g.Expect(s.Runners()).To(BeEmpty())
	g.Expect(p.RemoveRunner(ctx, scope, reg.ID)).To(Succeed(), "already gone")
	_, err = p.Register(ctx, scope, platform.RunnerSpec{Name: "linux-abcde"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.RemoveRunnerByName(ctx, scope, "linux-abcde")).To(Succeed())
	g.Expect(s.Runners()).To(BeEmpty())
}

// TestProtectedPoolDemand: a ref_protected pool's runners never take a job of an unprotected
// branch, so such jobs are no demand for it; they are for a not_protected pool.
func TestProtectedPoolDemand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddProject("acme/api")
	s.ProtectRef("acme/api", "v*", true)
	sec := secrets{}
	sec.add("gitlab", gitlab.KeyToken, []byte(s.AddToken(leastPrivilege...)))
	sec.add("gitlab-ca", gitlab.DefaultCAKey, s.CACertPEM())
	src := gitlab.NewSource(platform.Inputs{Reader: sec})
	onMain := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "main"})
	onTag := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "v1.0", Tag: true})
	s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "feature"})

	for access, want := range map[fleetv1.GitLabAccessLevel][]string{
		fleetv1.GitLabRefProtected: {fmt.Sprint(onMain.ID), fmt.Sprint(onTag.ID)},
		fleetv1.GitLabNotProtected: nil,
	} {
		p, scope, err := src.Platform(ctx, gitlabPool(s, "uid-"+string(access), fleetv1.GitLabScope{Project: "acme/api"}, access))
		g.Expect(err).NotTo(HaveOccurred())
		jobs, err := p.QueuedJobs(ctx, scope)
		g.Expect(err).NotTo(HaveOccurred())
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if want == nil {
			g.Expect(ids).To(HaveLen(3))
		} else {
			g.Expect(ids).To(ConsistOf(want))
		}
	}
}

// TestSourceRefusals: a pool whose Secrets are missing or unusable, or whose token GitLab
// refuses, gets the platform's errors, and nothing usable is built from it.
func TestSourceRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddGroup("acme")
	pool := gitlabPool(s, "uid-1", fleetv1.GitLabScope{Group: "acme"}, "")

	_, _, err := gitlab.NewSource(platform.Inputs{Reader: secrets{}}).Platform(ctx, pool)
	g.Expect(err).To(MatchError(platform.ErrCredentials))
	sec := secrets{}
	sec.add("gitlab", gitlab.KeyToken, []byte(s.AddToken(leastPrivilege...)))
	_, _, err = gitlab.NewSource(platform.Inputs{Reader: sec}).Platform(ctx, pool)
	g.Expect(err).To(MatchError(platform.ErrCABundle))
	sec.add("gitlab-ca", gitlab.DefaultCAKey, []byte("junk"))
	_, _, err = gitlab.NewSource(platform.Inputs{Reader: sec}).Platform(ctx, pool)
	g.Expect(err).To(MatchError(platform.ErrCABundle))

	sec.add("gitlab-ca", gitlab.DefaultCAKey, s.CACertPEM())
	sec.add("gitlab", gitlab.KeyToken, []byte("glpat-forged"))
	src := gitlab.NewSource(platform.Inputs{Reader: sec})
	_, err = src.Installation(ctx, pool)
	g.Expect(err).To(MatchError(platform.ErrUnauthorized))
	before := s.Requests(fakegitlab.EndpointListGroupRunners)
	_, err = src.Installation(ctx, pool)
	g.Expect(err).To(MatchError(platform.ErrUnauthorized))
	g.Expect(s.Requests(fakegitlab.EndpointListGroupRunners)).To(Equal(before), "a refusal is remembered, not asked again")

	plain := gitlabPool(s, "uid-2", fleetv1.GitLabScope{Group: "acme"}, "")
	plain.Spec.Platform.GitLab.URL = "http://gitlab.example.com"
	_, _, err = src.Platform(ctx, plain)
	g.Expect(err).To(MatchError(platform.ErrInsecureURL))
}

// TestProofDoesNotCrossScopes: two pools of a namespace share a token Secret; the token reaches
// the first pool's group, and the second names a group GitLab does not show it. The first
// pool's proof must not vouch for the second: its Installation asks GitLab and is refused.
func TestProofDoesNotCrossScopes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddGroup("acme")
	sec := secrets{}
	sec.add("gitlab", gitlab.KeyToken, []byte(s.AddToken(leastPrivilege...)))
	sec.add("gitlab-ca", gitlab.DefaultCAKey, s.CACertPEM())
	src := gitlab.NewSource(platform.Inputs{Reader: sec})

	proven := gitlabPool(s, "uid-1", fleetv1.GitLabScope{Group: "acme"}, "")
	_, err := src.Installation(ctx, proven)
	g.Expect(err).NotTo(HaveOccurred())

	other := gitlabPool(s, "uid-2", fleetv1.GitLabScope{Group: "someone-else"}, "")
	before := s.Requests(fakegitlab.EndpointListGroupRunners)
	_, err = src.Installation(ctx, other)
	g.Expect(err).To(HaveOccurred(), "a proof for group acme vouched for group someone-else")
	g.Expect(s.Requests(fakegitlab.EndpointListGroupRunners)).To(Equal(before+1), "the second scope is proven on its own")
}

// TestProofDoesNotCrossScopeKinds: a group and a project may be written with one path. A token
// proven on group acme/platform must not vouch for a pool naming a project acme/platform (which
// does not exist here): the project is proven on its own, and refused.
func TestProofDoesNotCrossScopeKinds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddGroup("acme")
	s.AddGroup("acme/platform")
	sec := secrets{}
	sec.add("gitlab", gitlab.KeyToken, []byte(s.AddToken(leastPrivilege...)))
	sec.add("gitlab-ca", gitlab.DefaultCAKey, s.CACertPEM())
	src := gitlab.NewSource(platform.Inputs{Reader: sec})

	_, err := src.Installation(ctx, gitlabPool(s, "uid-1", fleetv1.GitLabScope{Group: "acme/platform"}, ""))
	g.Expect(err).NotTo(HaveOccurred())

	before := s.Requests(fakegitlab.EndpointListProjectRunners)
	_, err = src.Installation(ctx, gitlabPool(s, "uid-2", fleetv1.GitLabScope{Project: "acme/platform"}, ""))
	g.Expect(err).To(HaveOccurred(), "a proof for group acme/platform vouched for project acme/platform")
	g.Expect(s.Requests(fakegitlab.EndpointListProjectRunners)).To(Equal(before+1), "the project is proven on its own")
}
