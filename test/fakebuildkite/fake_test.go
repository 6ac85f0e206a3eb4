package fakebuildkite_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

func client(t *testing.T, s *fakebuildkite.Server, token string) *bk.Client {
	t.Helper()
	c, err := bk.NewClient(bk.WithBaseURL(s.URL()+"/"), bk.WithTokenAuth(token), bk.WithHTTPClient(s.HTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func statusOf(err error) int {
	var er *bk.ErrorResponse
	if errors.As(err, &er) {
		return er.Response.StatusCode
	}
	return 0
}

// TestClusterTokensOverHTTPS: the real client creates, lists and deletes cluster agent tokens
// over TLS; the value appears only in the create response, and scopes are enforced.
func TestClusterTokensOverHTTPS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	g.Expect(s.URL()).To(HavePrefix("https://"))
	c := client(t, s, s.AddAPIToken(fakebuildkite.ScopeReadClusters, fakebuildkite.ScopeWriteClusters))

	created, _, err := c.ClusterTokens.Create(ctx, s.Organization(), s.ClusterID(), bk.ClusterTokenCreateUpdate{Description: "hyperfleet machine ns/m-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Token).NotTo(BeEmpty())
	g.Expect(created.Description).To(Equal("hyperfleet machine ns/m-1"))

	listed, _, err := c.ClusterTokens.List(ctx, s.Organization(), s.ClusterID(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(1))
	g.Expect(listed[0].ID).To(Equal(created.ID))
	g.Expect(listed[0].Token).To(BeEmpty(), "the value is only in the create response")
	got, _, err := c.ClusterTokens.Get(ctx, s.Organization(), s.ClusterID(), created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Token).To(BeEmpty())

	_, err = c.ClusterTokens.Delete(ctx, s.Organization(), s.ClusterID(), created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.ClusterTokens.Delete(ctx, s.Organization(), s.ClusterID(), created.ID)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))

	readOnly := client(t, s, s.AddAPIToken(fakebuildkite.ScopeReadClusters, fakebuildkite.ScopeReadBuilds))
	_, _, err = readOnly.ClusterTokens.Create(ctx, s.Organization(), s.ClusterID(), bk.ClusterTokenCreateUpdate{Description: "x"})
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden))
	_, _, err = readOnly.Agents.List(ctx, s.Organization(), nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusForbidden))
	_, _, err = client(t, s, "forged").ClusterTokens.List(ctx, s.Organization(), s.ClusterID(), nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusUnauthorized))
	_, _, err = c.ClusterTokens.List(ctx, s.Organization(), "other-cluster", nil)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))
}

// TestOneJobAgentProtocol: an agent registered with a cluster token takes the one job of its
// queue whose tags it has, runs it once, and the job's webhooks arrive in order.
func TestOneJobAgentProtocol(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hooks := make(chan http.Header, 10)
	bodies := make(chan []byte, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- r.Header
		bodies <- b
	}))
	defer recv.Close()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true, WebhookURL: recv.URL, WebhookToken: "hook-secret", WebhookSignature: true})

	other := s.CreateJob("api", []string{"queue=windows"})
	held := s.CreateJob("api", []string{"queue=linux"}, fakebuildkite.WithState(fakebuildkite.JobWaiting))
	gpu := s.CreateJob("api", []string{"queue=linux", "gpu=true"})
	mine := s.CreateJob("api", []string{"queue=linux", "os=linux"})

	tok := s.AddClusterToken("vm")
	a := fakebuildkite.NewAgentClient(s.AgentEndpoint(), s.HTTPClient())
	g.Expect(fakebuildkite.NewAgentClient(s.AgentEndpoint(), s.HTTPClient()).Register(ctx, "forged", "x", nil)).To(MatchError(ContainSubstring("401")))
	g.Expect(a.Register(ctx, tok.Value, "vm-1", []string{"queue=linux", "os=linux"})).To(Succeed())

	job, err := a.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job).NotTo(BeNil())
	g.Expect(job.ID).To(Equal(mine.ID), "not the other queue's, not the held one, not the one needing gpu=true")
	g.Expect(a.Accept(ctx, job.ID)).To(Succeed())
	g.Expect(a.Start(ctx, job.ID)).To(Succeed())
	g.Expect(a.Finish(ctx, job.ID, 0)).To(Succeed())
	g.Expect(a.Disconnect(ctx)).To(Succeed())

	done, _ := s.GetJob(mine.ID)
	g.Expect(done.State).To(Equal(fakebuildkite.JobFinished))
	g.Expect(done.Acquisitions).To(Equal(1))
	for _, id := range []string{other.ID, held.ID, gpu.ID} {
		j, _ := s.GetJob(id)
		g.Expect(j.Acquisitions).To(BeZero())
	}

	var events []string
	for len(events) < 5 {
		select {
		case h := <-hooks:
			g.Expect(h.Get("X-Buildkite-Token")).To(BeEmpty())
			g.Expect(h.Get("X-Buildkite-Signature")).To(MatchRegexp(`^timestamp=\d+,signature=[0-9a-f]{64}$`))
			events = append(events, h.Get("X-Buildkite-Event"))
			var p map[string]any
			g.Expect(json.Unmarshal(<-bodies, &p)).To(Succeed())
			g.Expect(p).To(HaveKey("job"))
			g.Expect(p).To(HaveKey("build"))
			g.Expect(p).To(HaveKey("pipeline"))
			g.Expect(p).To(HaveKey("sender"))
			g.Expect(p["event"]).To(Equal(h.Get("X-Buildkite-Event")))
		case <-time.After(5 * time.Second):
			t.Fatalf("webhooks: got %v", events)
		}
	}
	g.Expect(events).To(Equal([]string{"job.scheduled", "job.scheduled", "job.scheduled", "job.started", "job.finished"}))
}

// TestBuildsPaginateAndRateLimit: builds come in pages with Link headers go-buildkite follows,
// and a token over its budget gets 429 with RateLimit-Remaining and RateLimit-Reset.
func TestBuildsPaginateAndRateLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{RateLimit: 5})
	for range 5 {
		s.CreateJob("web", []string{"queue=linux"})
	}
	tok := s.AddAPIToken(fakebuildkite.ScopeReadBuilds)
	c := client(t, s, tok)
	builds, resp, err := c.Builds.ListByOrg(ctx, s.Organization(), &bk.BuildsListOptions{State: []string{"scheduled"}, ListOptions: bk.ListOptions{PerPage: 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(builds).To(HaveLen(2))
	g.Expect(resp.NextPage).To(Equal(2))
	g.Expect(resp.LastPage).To(Equal(3))
	g.Expect(builds[0].Jobs).To(HaveLen(1))
	g.Expect(builds[0].Jobs[0].State).To(Equal("scheduled"))
	g.Expect(builds[0].Jobs[0].AgentQueryRules).To(Equal([]string{"queue=linux"}))

	for range 5 {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v2/builds", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			g.Expect(resp.Header.Get("RateLimit-Remaining")).To(Equal("0"))
			g.Expect(resp.Header.Get("RateLimit-Reset")).To(MatchRegexp(`^[1-9]\d*$`))
			return
		}
	}
	t.Fatal("the sixth request within a minute was not throttled")
}

// TestMetrics: the metrics endpoint counts scheduled, running and waiting jobs per queue for
// an agent token, and refuses anything else.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{})
	s.CreateJob("api", []string{"queue=linux"})
	s.CreateJob("api", []string{"queue=linux"})
	s.CreateJob("api", []string{"queue=linux"}, fakebuildkite.WithState(fakebuildkite.JobBlocked))
	s.CreateJob("api", nil)
	get := func(token string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, s.AgentEndpoint()+"/metrics", nil)
		req.Header.Set("Authorization", "Token "+token)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, _ := get("forged")
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	resp, m := get(s.AddClusterToken("metrics").Value)
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	queues := m["jobs"].(map[string]any)["queues"].(map[string]any)
	g.Expect(queues["linux"]).To(Equal(map[string]any{"scheduled": 2.0, "running": 0.0, "waiting": 1.0, "total": 3.0}))
	g.Expect(queues["default"]).To(HaveKeyWithValue("scheduled", 1.0))
	g.Expect(m["organization"]).To(HaveKeyWithValue("slug", "acme"))
	g.Expect(strings.Contains(s.AgentEndpoint(), "/v3")).To(BeTrue())
}
