package fakebuildkite_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// The tests in this file check the fake against clients written by Buildkite, not by
// HyperFleet: go-buildkite for the REST API and webhooks, and buildkite-agent's api package
// for the agent API (agentapi_conformance_test.go). Each recorded answer names the page of
// https://buildkite.com/docs it follows.

func allScopes() []string {
	return []string{fakebuildkite.ScopeReadOrganizations, fakebuildkite.ScopeReadPipelines, fakebuildkite.ScopeReadBuilds,
		fakebuildkite.ScopeReadAgents, fakebuildkite.ScopeReadClusters}
}

// TestGoBuildkiteReadsOrganizationsPipelinesBuildsAndAgents: the reads of
// https://buildkite.com/docs/apis/rest-api (organizations, pipelines, builds with their jobs,
// agents) decode into go-buildkite's types, pages follow the Link header, and the errors are
// go-buildkite's *ErrorResponse with Buildkite's status and message.
func TestGoBuildkiteReadsOrganizationsPipelinesBuildsAndAgents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	for _, p := range []string{"web", "api", "docs", "infra", "mobile"} {
		s.CreateJob(p, []string{"queue=linux"})
	}
	second := s.CreateJob("api", []string{"queue=linux", "os=linux"})
	c := client(t, s, s.AddAPIToken(allScopes()...))

	orgs, _, err := c.Organizations.List(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(orgs).To(HaveLen(1))
	g.Expect(orgs[0].Slug).To(Equal("acme"))
	org, _, err := c.Organizations.Get(ctx, "acme")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(org.ID).To(Equal(orgs[0].ID))
	g.Expect(org.CreatedAt).NotTo(BeNil())

	// Two pipelines a page: three pages, every pipeline once, by name.
	var names []string
	opt := &bk.PipelineListOptions{ListOptions: bk.ListOptions{PerPage: 2}}
	for pages := 0; ; pages++ {
		g.Expect(pages).To(BeNumerically("<", 3))
		page, resp, err := c.Pipelines.List(ctx, "acme", opt)
		g.Expect(err).NotTo(HaveOccurred())
		for _, p := range page {
			names = append(names, p.Slug)
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	g.Expect(names).To(Equal([]string{"api", "docs", "infra", "mobile", "web"}))
	p, _, err := c.Pipelines.Get(ctx, "acme", "api")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ClusterID).To(Equal(s.ClusterID()))
	g.Expect(p.BuildsURL).To(HaveSuffix("/v2/organizations/acme/pipelines/api/builds"))

	_, _, err = c.Pipelines.Get(ctx, "acme", "no-such-pipeline")
	var er *bk.ErrorResponse
	g.Expect(errors.As(err, &er)).To(BeTrue(), "go-buildkite's error type, from a JSON body")
	g.Expect(er.Response.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(er.Message).To(Equal("No pipeline found"))
	_, _, err = c.Builds.ListByPipeline(ctx, "acme", "no-such-pipeline", nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))
	_, _, err = c.Builds.Get(ctx, "acme", "no-such-pipeline", "1", nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))

	builds, _, err := c.Builds.ListByPipeline(ctx, "acme", "api", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(builds).To(HaveLen(2), "only the pipeline's builds")
	g.Expect(builds[0].Number).To(Equal(2), "newest first")
	b, _, err := c.Builds.Get(ctx, "acme", "api", "2", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Jobs).To(HaveLen(1))
	g.Expect(b.Jobs[0].ID).To(Equal(second.ID))
	g.Expect(b.Jobs[0].AgentQueryRules).To(Equal([]string{"queue=linux", "os=linux"}))

	// An agent registered and connected over the agent API is listed and read over REST.
	a := fakebuildkite.NewAgentClient(s.AgentEndpoint(), s.HTTPClient())
	g.Expect(a.Register(ctx, s.AddClusterToken("vm").Value, "vm-1", []string{"queue=linux"})).To(Succeed())
	agents, _, err := c.Agents.List(ctx, "acme", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agents).To(HaveLen(1))
	g.Expect(agents[0].Name).To(Equal("vm-1"))
	g.Expect(agents[0].ConnectedState).To(Equal("connected"))
	got, _, err := c.Agents.Get(ctx, "acme", a.AgentID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Metadata).To(Equal([]string{"queue=linux"}))
	_, _, err = c.Agents.Get(ctx, "acme", fakebuildkite.NewUUID())
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))

	// A token Buildkite does not know is 401 on every path, even an organization that does not
	// exist: authentication comes before the lookup.
	for _, call := range []func(*bk.Client) error{
		func(c *bk.Client) error { _, _, err := c.Organizations.List(ctx, nil); return err },
		func(c *bk.Client) error { _, _, err := c.Pipelines.Get(ctx, "acme", "api"); return err },
		func(c *bk.Client) error { _, _, err := c.Agents.List(ctx, "globex", nil); return err },
	} {
		err := call(client(t, s, "bkua_forged"))
		g.Expect(errors.As(err, &er)).To(BeTrue())
		g.Expect(er.Response.StatusCode).To(Equal(http.StatusUnauthorized))
		g.Expect(er.Message).NotTo(BeEmpty())
	}
	// A token without the scope is 403.
	_, _, err = client(t, s, s.AddAPIToken(fakebuildkite.ScopeReadBuilds)).Pipelines.List(ctx, "acme", nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden))
}

// TestBuildFiltersInEveryDocumentedForm: the builds lists take state and branch as one value
// or as a Rails array, "finished" standing for the ended states, a * wildcard in a branch, and
// a per_page above the maximum of 100 served as 100
// (https://buildkite.com/docs/apis/rest-api/builds#list-all-builds,
// https://buildkite.com/docs/apis/rest-api#pagination).
func TestBuildFiltersInEveryDocumentedForm(t *testing.T) {
	g := NewWithT(t)
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{})
	scheduled := s.CreateJob("api", []string{"queue=linux"})
	canceled := s.CreateJob("api", []string{"queue=linux"})
	s.Cancel(canceled.ID)
	tok := s.AddAPIToken(fakebuildkite.ScopeReadBuilds)
	list := func(query string) (int, []string) {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v2/organizations/acme/builds?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var builds []struct {
			ID   string `json:"id"`
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&builds)
		var ids []string
		for _, b := range builds {
			ids = append(ids, b.Jobs[0].ID)
		}
		return resp.StatusCode, ids
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"state=scheduled", []string{scheduled.ID}},
		{"state[]=scheduled&state[]=canceled", []string{canceled.ID, scheduled.ID}},
		{"state=finished", []string{canceled.ID}},
		{"branch=main", []string{canceled.ID, scheduled.ID}},
		{"branch[]=release&branch[]=main", []string{canceled.ID, scheduled.ID}},
		{"branch=*ai*", []string{canceled.ID, scheduled.ID}},
		{"branch=feature/*", nil},
		{"per_page=250", []string{canceled.ID, scheduled.ID}},
	} {
		status, ids := list(tc.query)
		g.Expect(status).To(Equal(http.StatusOK), tc.query)
		g.Expect(ids).To(Equal(tc.want), tc.query)
	}
}

// TestUnknownRoutesAreJSON404s: a path no endpoint serves, or a served path with another
// method, is a 404 with Buildkite's JSON error body, not net/http's text/plain 404 or 405; and
// the API root answers as https://buildkite.com/docs/apis/rest-api#schema shows.
func TestUnknownRoutesAreJSON404s(t *testing.T) {
	g := NewWithT(t)
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{})
	tok := s.AddAPIToken(allScopes()...)
	do := func(method, path string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(method, s.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var body map[string]any
		g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed(), method+" "+path)
		return resp, body
	}
	for _, r := range [][2]string{
		{http.MethodGet, "/v2/no-such-thing"},
		{http.MethodDelete, "/v2/builds"},
		{http.MethodPost, "/v2/organizations/acme/agents"},
		{http.MethodGet, "/v3/no-such-thing"},
		{http.MethodGet, "/v1/organizations"},
	} {
		resp, body := do(r[0], r[1])
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), r[0]+" "+r[1])
		g.Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"))
		g.Expect(body).To(HaveKeyWithValue("message", "No route found"))
	}
	resp, body := do(http.MethodGet, "/")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(body).To(HaveKey("message"))
	g.Expect(body).To(HaveKey("timestamp"))
}

// TestRateLimitedAnswer: every REST answer carries RateLimit-Scope, and the 429 carries the
// body of https://buildkite.com/docs/apis/rest-api/rate-limits#exceeding-the-rate-limit.
func TestRateLimitedAnswer(t *testing.T) {
	g := NewWithT(t)
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{RateLimit: 2})
	tok := s.AddAPIToken(fakebuildkite.ScopeReadBuilds)
	var last *http.Response
	var body map[string]any
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v2/builds", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Header.Get("RateLimit-Scope")).To(Equal("rest"))
		body = nil
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		last = resp
	}
	g.Expect(last.StatusCode).To(Equal(http.StatusTooManyRequests))
	g.Expect(body).To(HaveKeyWithValue("scope", "rest"))
	g.Expect(body).To(HaveKeyWithValue("limit", 2.0))
	g.Expect(body).To(HaveKeyWithValue("current", 3.0))
	g.Expect(body["reset"]).To(BeNumerically(">", 0))
	g.Expect(body["message"]).To(MatchRegexp(`^You have exceeded your API rate limit\. Please wait \d+ seconds before making more requests\.$`))
}

// TestPingWebhookPassesGoBuildkite: the fake sends the ping event, signed, and go-buildkite's
// own ValidatePayload and ParseWebHook accept it as a PingEvent of the organization
// (https://buildkite.com/docs/apis/webhooks).
func TestPingWebhookPassesGoBuildkite(t *testing.T) {
	g := NewWithT(t)
	got := make(chan *bk.PingEvent, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := bk.ValidatePayload(r, []byte("hook-secret"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := bk.ParseWebHook(bk.WebHookType(r), payload)
		if p, ok := ev.(*bk.PingEvent); ok && err == nil {
			got <- p
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer recv.Close()
	for _, signature := range []bool{true, false} {
		s := fakebuildkite.StartForTest(t, fakebuildkite.Options{WebhookURL: recv.URL, WebhookToken: "hook-secret", WebhookSignature: signature})
		s.SendPing()
		select {
		case p := <-got:
			g.Expect(p.Event).To(Equal("ping"))
			g.Expect(p.Organization.Slug).To(Equal("acme"))
		case <-time.After(5 * time.Second):
			t.Fatalf("no ping accepted (signature %v): %+v", signature, s.Deliveries())
		}
		g.Eventually(s.Deliveries).Should(ContainElement(HaveField("StatusCode", http.StatusOK)))
	}
}
