package gitlab_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// receiver verifies and records Job Hooks as HyperFleet's receiver would.
type receiver struct {
	mu     sync.Mutex
	events []gitlab.JobEvent
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d, err := gitlab.ParseDelivery(req.Header, body, []byte(hookSecret))
	if err != nil {
		http.Error(w, err.Error(), platform.WebhookHTTPStatus(err))
		return
	}
	if d.Kind == gitlab.KindJob {
		r.mu.Lock()
		r.events = append(r.events, *d.Job)
		r.mu.Unlock()
	}
}

func (r *receiver) phases(jobID int64) []gitlab.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []gitlab.Phase
	for _, e := range r.events {
		if e.JobID == jobID {
			out = append(out, e.Phase)
		}
	}
	return out
}

// TestFlow drives the whole GitLab loop over HTTPS with the real client: demand and held jobs
// are listed for a group, a VM's runner is created with the pool's tags and mark and its
// one-time config takes exactly the job the tags allow, Job Hooks verified with the pool's
// secret follow the job, a busy runner is not deleted, and a finished one is, by ID and by name.
func TestFlow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rec := &receiver{}
	hooks := httptest.NewServer(rec)
	t.Cleanup(hooks.Close)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true, WebhookURL: hooks.URL, WebhookToken: hookSecret})
	s.AddProject("acme/platform/api")
	s.AddProject("acme/platform/tools/cli")
	s.AddProject("acme/elsewhere")
	s.ProtectRef("acme/platform/api", "release/*", false)
	c := newClient(t, s, s.AddToken(leastPrivilege...))
	scope := gitlab.Scope{Group: "acme/platform"}
	pool := gitlab.RunnerSettings{Tags: []string{"linux"}}
	mark := platform.PoolRunnerLabel("pool-uid-1")

	build := s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "feature"})
	cli := s.CreateJob("acme/platform/tools/cli", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "feature"})
	deploy := s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"linux"}, Ref: "main", Status: fakegitlab.JobManual})
	s.CreateJob("acme/elsewhere", fakegitlab.JobSpec{Tags: []string{"linux"}})

	jobs, err := c.Jobs(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	byID := map[int64]gitlab.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	g.Expect(byID).To(HaveLen(3), "the job of another group is out of scope")
	g.Expect(byID[build.ID].Phase).To(Equal(gitlab.PhaseDemand))
	g.Expect(byID[build.ID].Tags).To(Equal([]string{"linux"}))
	g.Expect(byID[cli.ID].ProjectPath).To(Equal("acme/platform/tools/cli"), "subgroups are in a group's scope")
	g.Expect(byID[deploy.ID].Phase).To(Equal(gitlab.PhaseHeld), "a manual job is no demand")

	for ref, want := range map[string]bool{"main": true, "release/2.0": true, "feature": false} {
		got, err := c.RefProtected(ctx, "acme/platform/api", ref, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), ref)
	}

	reg, err := c.Register(ctx, scope, "linux-7d9f-abcde", mark, pool)
	g.Expect(err).NotTo(HaveOccurred())
	var cfg gitlab.RunnerConfig
	g.Expect(json.Unmarshal(reg.Config, &cfg)).To(Succeed())
	g.Expect(cfg.URL).To(Equal(s.URL()))
	g.Expect(cfg.Token).To(HavePrefix("glrt-"))
	g.Expect(cfg.CA).To(Equal(string(s.CACertPEM())))
	runners := s.Runners()
	g.Expect(runners).To(HaveLen(1))
	g.Expect(runners[0].ID).To(Equal(reg.RunnerID))
	g.Expect(runners[0].Type).To(Equal(fakegitlab.GroupType))
	g.Expect(runners[0].Description).To(Equal("HyperFleet runner linux-7d9f-abcde"))
	g.Expect(runners[0].Tags).To(ConsistOf("linux", mark))
	g.Expect(runners[0].RunUntagged).To(BeFalse())
	g.Expect(runners[0].Locked).To(BeTrue())

	// Registering the same name again replaces the leftover runner.
	reg, err = c.Register(ctx, scope, "linux-7d9f-abcde", mark, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Runners()).To(HaveLen(1))
	g.Expect(json.Unmarshal(reg.Config, &cfg)).To(Succeed())

	// The VM's runner takes the oldest job its tags allow, once.
	vm := &fakegitlab.RunnerClient{URL: cfg.URL, Token: cfg.Token, HTTP: s.HTTPClient()}
	job, err := vm.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.ID).To(Equal(build.ID))
	g.Expect(c.Deregister(ctx, reg.RunnerID)).To(MatchError(platform.ErrRunnerBusy))
	g.Expect(s.Runners()).To(HaveLen(1), "a busy runner stays")
	g.Expect(vm.UpdateJob(ctx, job, "success")).To(Succeed())
	got, err := c.GetJob(ctx, "acme/platform/api", build.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Phase).To(Equal(gitlab.PhaseCompleted))
	g.Expect(got.RunnerID).To(Equal(reg.RunnerID))
	g.Eventually(func() []gitlab.Phase { return rec.phases(build.ID) }).Should(Equal(
		[]gitlab.Phase{gitlab.PhaseDemand, gitlab.PhaseInProgress, gitlab.PhaseCompleted}))

	listed, err := c.Runners(ctx, scope, mark)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(1))
	g.Expect(listed[0].Name).To(Equal("linux-7d9f-abcde"))
	other, err := c.Runners(ctx, scope, platform.PoolRunnerLabel("pool-uid-2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).To(BeEmpty(), "another pool's mark lists none of this pool's runners")

	g.Expect(c.Deregister(ctx, reg.RunnerID)).To(Succeed())
	g.Expect(s.Runners()).To(BeEmpty())
	g.Expect(c.Deregister(ctx, reg.RunnerID)).To(Succeed(), "already gone is no error")
	_, err = vm.RequestJob(ctx)
	g.Expect(err).To(HaveOccurred(), "a deleted runner's token takes no job")

	// By name, for a VM whose runner ID was never recorded.
	_, err = c.Register(ctx, scope, "linux-7d9f-fghij", mark, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.DeregisterByName(ctx, scope, "linux-7d9f-fghij")).To(Succeed())
	g.Expect(s.Runners()).To(BeEmpty())
}

// TestRegisterInEachScope: project, group and instance pools create runners of the matching
// type; instance runners need an administrator's token.
func TestRegisterInEachScope(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	p := s.AddProject("acme/api")
	settings := gitlab.RunnerSettings{RunUntagged: true, AccessLevel: gitlab.AccessRefProtected}
	c := newClient(t, s, s.AddToken(leastPrivilege...))

	reg, err := c.Register(ctx, gitlab.Scope{Project: "acme/api"}, "m-1", "", settings)
	g.Expect(err).NotTo(HaveOccurred())
	r := s.Runners()[0]
	g.Expect(r.Type).To(Equal(fakegitlab.ProjectType))
	g.Expect(r.ProjectID).To(Equal(p.ID))
	g.Expect(r.AccessLevel).To(Equal(fakegitlab.AccessRefProtected))
	g.Expect(c.Deregister(ctx, reg.RunnerID)).To(Succeed())

	_, err = c.Register(ctx, gitlab.Scope{Instance: true}, "m-2", "", settings)
	g.Expect(err).To(MatchError(platform.ErrUnauthorized), "instance runners need an administrator")
	admin := newClient(t, s, s.AddAdminToken(leastPrivilege...))
	_, err = admin.Register(ctx, gitlab.Scope{Instance: true}, "m-2", "", settings)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Runners()[0].Type).To(Equal(fakegitlab.InstanceType))
	listed, err := admin.Runners(ctx, gitlab.Scope{Instance: true}, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(1))

	_, err = c.Register(ctx, gitlab.Scope{Group: "acme", Project: "acme/api"}, "m-3", "", settings)
	g.Expect(err).To(MatchError(platform.ErrInvalid))
	_, err = c.Register(ctx, gitlab.Scope{Group: "acme"}, "m-3", "", gitlab.RunnerSettings{})
	g.Expect(err).To(MatchError(platform.ErrInvalid), "a runner that could take no job")
}
