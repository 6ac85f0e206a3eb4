package fakegitlab_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

func client(t *testing.T, s *fakegitlab.Server, token string) *gl.Client {
	t.Helper()
	c, err := gl.NewClient(token, gl.WithBaseURL(s.APIURL()), gl.WithHTTPClient(s.HTTPClient()), gl.WithoutRetries())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func statusOf(err error) int {
	var er *gl.ErrorResponse
	if errors.As(err, &er) {
		return er.Response.StatusCode
	}
	if errors.Is(err, gl.ErrNotFound) {
		return http.StatusNotFound
	}
	return 0
}

// TestRunnersOverHTTPS: the real client creates a group runner over TLS and gets a glrt-
// token once, lists and deletes it; scopes and tokens are enforced.
func TestRunnersOverHTTPS(t *testing.T) {
	g := NewWithT(t)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	g.Expect(s.URL()).To(HavePrefix("https://"))
	grp := s.AddGroup("acme/platform")
	c := client(t, s, s.AddToken(fakegitlab.ScopeCreateRunner, fakegitlab.ScopeManageRunner, fakegitlab.ScopeReadAPI))

	created, _, err := c.Users.CreateUserRunner(&gl.CreateUserRunnerOptions{
		RunnerType: gl.Ptr("group_type"), GroupID: gl.Ptr(grp.ID), Description: gl.Ptr("HyperFleet runner m-1"),
		TagList: gl.Ptr([]string{"linux", "x64"}), RunUntagged: gl.Ptr(false), AccessLevel: gl.Ptr("ref_protected"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Token).To(HavePrefix("glrt-"))

	listed, _, err := c.Runners.ListGroupsRunners("acme/platform", &gl.ListGroupsRunnersOptions{Type: gl.Ptr("group_type")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(1))
	g.Expect(listed[0].Description).To(Equal("HyperFleet runner m-1"))
	g.Expect(listed[0].Token).To(BeEmpty(), "the token is only in the create response")
	details, _, err := c.Runners.GetRunnerDetails(created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(details.TagList).To(ConsistOf("linux", "x64"))
	g.Expect(details.AccessLevel).To(Equal("ref_protected"))
	// A sibling group does not see it.
	s.AddGroup("acme/other")
	listed, _, err = c.Runners.ListGroupsRunners("acme/other", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(BeEmpty())

	_, err = c.Runners.RemoveRunner(created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Runners.RemoveRunner(created.ID)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))

	readOnly := client(t, s, s.AddToken(fakegitlab.ScopeReadAPI))
	_, _, err = readOnly.Users.CreateUserRunner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("group_type"), GroupID: gl.Ptr(grp.ID)})
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden))
	_, _, err = c.Users.CreateUserRunner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("instance_type")})
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden), "instance runners need an administrator")
	_, _, err = c.Users.CreateUserRunner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("group_type")})
	g.Expect(statusOf(err)).To(Equal(http.StatusBadRequest))
	_, _, err = c.Users.CreateUserRunner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("group_type"), GroupID: gl.Ptr(grp.ID), RunUntagged: gl.Ptr(false)})
	g.Expect(statusOf(err)).To(Equal(http.StatusBadRequest), "a runner that could run nothing")
	_, _, err = client(t, s, "glpat-forged").Runners.ListGroupsRunners(grp.ID, nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusUnauthorized))
	_, _, err = c.Runners.ListAllRunners(nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden), "listing every runner needs an administrator")
}

// TestJobsPaginationAndPaths: pending and running jobs are listed by scope[] over pages that
// X-Next-Page links, with the project named by ID or by its URL-encoded path.
func TestJobsPaginationAndPaths(t *testing.T) {
	g := NewWithT(t)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{})
	p := s.AddProject("acme/platform/api")
	for range 5 {
		s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	}
	s.CreateJob("acme/platform/api", fakegitlab.JobSpec{Status: fakegitlab.JobManual})
	done := s.CreateJob("acme/platform/api", fakegitlab.JobSpec{})
	s.SetJobStatus(done.ID, fakegitlab.JobSuccess)
	c := client(t, s, s.AddToken(fakegitlab.ScopeReadAPI))

	for _, pid := range []any{p.ID, "acme/platform/api"} {
		opt := &gl.ListJobsOptions{ListOptions: gl.ListOptions{PerPage: 2},
			Scope: &[]gl.BuildStateValue{gl.Pending, gl.Running}}
		var ids []int64
		for pages := 0; ; pages++ {
			g.Expect(pages).To(BeNumerically("<", 5))
			jobs, resp, err := c.Jobs.ListProjectJobs(pid, opt)
			g.Expect(err).NotTo(HaveOccurred())
			for _, j := range jobs {
				g.Expect(j.Status).To(Equal("pending"))
				g.Expect(j.TagList).To(Equal([]string{"linux"}))
				ids = append(ids, j.ID)
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
		g.Expect(ids).To(HaveLen(5))
	}
	j, _, err := c.Jobs.GetJob("acme/platform/api", done.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Status).To(Equal("success"))
	_, _, err = c.Jobs.GetJob("acme/other", done.ID)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))
	projects, _, err := c.Groups.ListGroupProjects("acme", &gl.ListGroupProjectsOptions{IncludeSubGroups: gl.Ptr(true)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(projects).To(HaveLen(1))
	g.Expect(projects[0].PathWithNamespace).To(Equal("acme/platform/api"))
}

type hookRecorder struct {
	mu     sync.Mutex
	events []*gl.JobEvent
	tokens []string
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ev, err := gl.ParseWebhook(gl.HookEventType(r), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev.(*gl.JobEvent))
	h.tokens = append(h.tokens, r.Header.Get("X-Gitlab-Token"))
}

func (h *hookRecorder) statuses(jobID int64) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.BuildID == jobID {
			out = append(out, e.BuildStatus)
		}
	}
	return out
}

// TestRunnerMatching: GitLab's rules decide which runner gets which job: tags (all of the
// job's), run_untagged for jobs without tags, ref_protected runners only for protected refs,
// and the runner's scope; each job is handed out once and its Job Hooks arrive in order.
func TestRunnerMatching(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rec := &hookRecorder{}
	hooks := httptest.NewServer(rec)
	t.Cleanup(hooks.Close)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{WebhookURL: hooks.URL, WebhookToken: "hook-secret"})
	api := s.AddProject("acme/api")
	s.AddProject("other/web")
	admin := client(t, s, s.AddAdminToken(fakegitlab.ScopeAPI))
	runner := func(opt *gl.CreateUserRunnerOptions) *fakegitlab.RunnerClient {
		r, _, err := admin.Users.CreateUserRunner(opt)
		g.Expect(err).NotTo(HaveOccurred())
		return &fakegitlab.RunnerClient{URL: s.URL(), Token: r.Token, HTTP: s.HTTPClient()}
	}
	tagged := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux", "x64"}, Ref: "feature"})
	untagged := s.CreateJob("acme/api", fakegitlab.JobSpec{Ref: "feature"})
	protected := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"deploy"}, Ref: "main"})
	unprotected := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"deploy"}, Ref: "feature"})
	elsewhere := s.CreateJob("other/web", fakegitlab.JobSpec{Tags: []string{"linux"}})

	linuxOnly := runner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("project_type"), ProjectID: gl.Ptr(api.ID),
		TagList: gl.Ptr([]string{"linux"}), RunUntagged: gl.Ptr(false)})
	j, err := linuxOnly.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j).To(BeNil(), "the tagged job needs x64 too, and the job of other/web is out of scope")

	full := runner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("group_type"), GroupID: gl.Ptr(api.GroupID),
		TagList: gl.Ptr([]string{"linux", "x64", "gpu"}), RunUntagged: gl.Ptr(false)})
	j, err = full.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.ID).To(Equal(tagged.ID))
	g.Expect(full.UpdateJob(ctx, j, "success")).To(Succeed())
	g.Expect(full.UpdateJob(ctx, j, "success")).NotTo(Succeed(), "a finished job takes no more updates")
	j, err = full.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j).To(BeNil(), "untagged jobs need run_untagged")

	anyJob := runner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("instance_type"), RunUntagged: gl.Ptr(true)})
	j, err = anyJob.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.ID).To(Equal(untagged.ID))

	deployer := runner(&gl.CreateUserRunnerOptions{RunnerType: gl.Ptr("project_type"), ProjectID: gl.Ptr(api.ID),
		TagList: gl.Ptr([]string{"deploy"}), RunUntagged: gl.Ptr(false), AccessLevel: gl.Ptr("ref_protected")})
	j, err = deployer.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.ID).To(Equal(protected.ID))
	g.Expect(j.Variable("CI_COMMIT_REF_PROTECTED")).To(Equal("true"))
	j, err = deployer.RequestJob(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j).To(BeNil(), "a ref_protected runner leaves the job of an unprotected branch")

	forged := &fakegitlab.RunnerClient{URL: s.URL(), Token: "glrt-forged"}
	_, err = forged.RequestJob(ctx)
	var se *fakegitlab.StatusError
	g.Expect(errors.As(err, &se)).To(BeTrue())
	g.Expect(se.StatusCode).To(Equal(http.StatusForbidden))

	for _, id := range []int64{unprotected.ID, elsewhere.ID} {
		got, _ := s.GetJob(id)
		g.Expect(got.Status).To(Equal(fakegitlab.JobPending))
	}
	g.Eventually(func() []string { return rec.statuses(tagged.ID) }).Should(Equal([]string{"pending", "running", "success"}))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, ev := range rec.events {
		g.Expect(ev.ObjectKind).To(Equal("build"))
		g.Expect(rec.tokens[i]).To(Equal("hook-secret"))
		if ev.BuildID == tagged.ID && ev.BuildStatus == "running" {
			g.Expect(ev.Runner.Tags).To(ConsistOf("linux", "x64", "gpu"))
			g.Expect(ev.ProjectID).To(Equal(api.ID))
		}
	}
}

// TestRateLimit: past the per-minute budget the API answers 429 "Retry later" with
// Retry-After and the RateLimit-* headers; an injected throttle looks the same.
func TestRateLimit(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{RateLimit: 2, Clock: func() time.Time { return now }})
	s.AddProject("acme/api")
	tok := s.AddToken(fakegitlab.ScopeReadAPI)
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.APIURL()+"/projects/acme%2Fapi/jobs?scope[]=pending", nil)
		req.Header.Set("PRIVATE-TOKEN", tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	g.Expect(get().StatusCode).To(Equal(http.StatusOK))
	resp := get()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("RateLimit-Remaining")).To(Equal("0"))
	resp = get()
	g.Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
	g.Expect(resp.Header.Get("Retry-After")).To(Equal("60"))
	g.Expect(resp.Header.Get("RateLimit-Reset")).To(Equal(strconv.FormatInt(now.Add(time.Minute).Unix(), 10)))

	now = now.Add(time.Minute)
	g.Expect(get().StatusCode).To(Equal(http.StatusOK), "a new minute, a new budget")
	s.InjectFault(fakegitlab.EndpointListProjectJobs, fakegitlab.Fault{RateLimited: true, RetryAfter: 30 * time.Second})
	resp = get()
	g.Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
	g.Expect(resp.Header.Get("Retry-After")).To(Equal("30"))
}

// TestAdminJobs: the admin endpoint creates a job in a project (its Job Hook sent as for any job)
// and lists every job with its status and acquisitions.
func TestAdminJobs(t *testing.T) {
	g := NewWithT(t)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	s.AddProject("acme/app")
	post := func(body string) *http.Response {
		resp, err := s.HTTPClient().Post(s.URL()+"/_fake/jobs", "application/json", strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		return resp
	}
	resp := post(`{"project":"acme/app","tags":["linux"],"name":"build-1"}`)
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	var created fakegitlab.AdminJob
	g.Expect(json.NewDecoder(resp.Body).Decode(&created)).To(Succeed())
	g.Expect(created.Status).To(Equal(fakegitlab.JobPending))
	g.Expect(post(`{"project":"acme/nope","tags":["linux"]}`).StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(post(`{"project":"acme/app","status":"bogus"}`).StatusCode).To(Equal(http.StatusBadRequest))

	resp, err := s.HTTPClient().Get(s.URL() + "/_fake/jobs")
	g.Expect(err).NotTo(HaveOccurred())
	var jobs []fakegitlab.AdminJob
	g.Expect(json.NewDecoder(resp.Body).Decode(&jobs)).To(Succeed())
	g.Expect(jobs).To(ConsistOf(And(HaveField("ID", created.ID), HaveField("Project", "acme/app"), HaveField("Tags", []string{"linux"}))))
	g.Expect(s.VerifyEachJobRanOnce()).To(Succeed())
}
