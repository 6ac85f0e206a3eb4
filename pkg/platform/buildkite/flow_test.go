package buildkite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// TestFlow runs a pool's life against the fake over HTTPS with the real client: demand is read
// from the builds API (held jobs and other queues left out), each VM gets its own agent token
// whose config runs exactly one job, and the token is deleted when the VM goes.
func TestFlow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	c := newClient(t, s, s.AddAPIToken(leastPrivilege...))
	pool := buildkite.AgentTags("linux", map[string]string{"os": "linux"})

	mine := s.CreateJob("api", []string{"queue=linux", "os=linux"})
	s.CreateJob("api", []string{"queue=linux"}, fakebuildkite.WithState(fakebuildkite.JobWaiting))
	s.CreateJob("api", []string{"queue=linux"}, fakebuildkite.WithState(fakebuildkite.JobBlocked))
	s.CreateJob("web", []string{"queue=macos"})
	s.CreateJob("web", nil)

	jobs, err := c.Jobs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(4), "the blocked build is not active; its held job needs no agent")
	var demand []buildkite.Job
	for _, j := range jobs {
		if j.Phase == buildkite.PhaseDemand && pool.Matches(j.Rules) {
			demand = append(demand, j)
		}
	}
	g.Expect(demand).To(ConsistOf(HaveField("ID", mine.ID)))
	g.Expect(demand[0].Pipeline).To(Equal("api"))
	got, err := c.GetJob(ctx, "api", demand[0].BuildNumber, mine.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Phase).To(Equal(buildkite.PhaseDemand))

	reg, err := c.Register(ctx, "linux-abc12", "hyperfleet-pool-0123456789abcdef", pool)
	g.Expect(err).NotTo(HaveOccurred())
	var cfg buildkite.AgentConfig
	g.Expect(json.Unmarshal(reg.Config, &cfg)).To(Succeed())
	g.Expect(cfg.Endpoint).To(Equal(s.AgentEndpoint()))
	g.Expect(cfg.Tags).To(Equal([]string{"os=linux", "queue=linux"}))
	g.Expect(cfg.Name).To(Equal("linux-abc12"))
	g.Expect(s.ClusterTokens()).To(ConsistOf(And(HaveField("ID", reg.TokenID), HaveField("Description", "HyperFleet runner linux-abc12 hyperfleet-pool-0123456789abcdef"), HaveField("Value", cfg.Token))))

	// The VM's agent, with nothing but its config.
	agent := fakebuildkite.NewAgentClient(cfg.Endpoint, s.HTTPClient())
	g.Expect(agent.Register(ctx, cfg.Token, cfg.Name, cfg.Tags)).To(Succeed())
	job, err := agent.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.ID).To(Equal(mine.ID))
	g.Expect(agent.Accept(ctx, job.ID)).To(Succeed())
	g.Expect(agent.Start(ctx, job.ID)).To(Succeed())
	g.Expect(agent.Finish(ctx, job.ID, 0)).To(Succeed())
	g.Expect(agent.Disconnect(ctx)).To(Succeed())
	done, _ := s.GetJob(mine.ID)
	g.Expect(done.Acquisitions).To(Equal(1))

	// The VM goes: its token goes, and nobody can register with it again.
	g.Expect(c.Deregister(ctx, reg.TokenID)).To(Succeed())
	g.Expect(c.Deregister(ctx, reg.TokenID)).To(Succeed(), "already gone is not an error")
	g.Expect(s.ClusterTokens()).To(BeEmpty())
	g.Expect(fakebuildkite.NewAgentClient(cfg.Endpoint, s.HTTPClient()).Register(ctx, cfg.Token, "thief", cfg.Tags)).To(MatchError(ContainSubstring("401")))

	// A retry after a crash replaces the leftover token of the same VM instead of adding one.
	// Another pool's VM of the same name (another namespace) keeps its token.
	const mark = "hyperfleet-pool-00000000000000aa"
	first, err := c.Register(ctx, "linux-def34", mark, pool)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := c.Register(ctx, "linux-def34", mark, pool)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := c.Register(ctx, "linux-def34", "hyperfleet-pool-00000000000000bb", pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.ClusterTokens()).To(ConsistOf(HaveField("ID", second.TokenID), HaveField("ID", other.TokenID)))
	g.Expect(second.TokenID).NotTo(Equal(first.TokenID))
	s.AddClusterToken("someone else's token")
	regs, err := c.Registrations(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(regs).To(ConsistOf(buildkite.TokenInfo{ID: second.TokenID, Name: "linux-def34", Mark: mark},
		buildkite.TokenInfo{ID: other.TokenID, Name: "linux-def34", Mark: "hyperfleet-pool-00000000000000bb"}), "only HyperFleet's tokens")
	g.Expect(c.DeregisterByName(ctx, "linux-def34", mark)).To(Succeed())
	g.Expect(s.ClusterTokens()).To(ConsistOf(HaveField("Description", "someone else's token"), HaveField("ID", other.TokenID)))

	// The metrics endpoint counts the same demand per queue with an agent token.
	queues, err := c.Metrics(ctx, s.AddClusterToken("metrics").Value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(queues["linux"]).To(Equal(buildkite.QueueMetrics{Scheduled: 0, Running: 0, Waiting: 2, Total: 2}))
	g.Expect(queues["macos"].Scheduled).To(Equal(1))
	_, err = c.Metrics(ctx, "forged")
	g.Expect(err).To(MatchError(platform.ErrUnauthorized))
}

// TestJobsFollowsPages: demand beyond one page of builds is found through the Link headers.
func TestJobsFollowsPages(t *testing.T) {
	g := NewWithT(t)
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	for i := range 230 {
		s.CreateJob(fmt.Sprintf("p%d", i%7), []string{"queue=linux"})
	}
	c := newClient(t, s, s.AddAPIToken(leastPrivilege...))
	jobs, err := c.Jobs(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(230))
	g.Expect(s.Requests(fakebuildkite.EndpointListOrgBuilds)).To(Equal(3))
}
