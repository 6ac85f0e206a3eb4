package github

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// startJob makes a runner in repo take the oldest matching queued job, leaving it in progress.
func startJob(t *testing.T, c *Client, repo, runnerName string, labels []string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	encoded, _, err := jitConfig(c, ctx, repoScope(repo), platform.RunnerSpec{Name: runnerName, Labels: labels})
	g.Expect(err).NotTo(HaveOccurred())
	runner, err := fakegithub.NewRunnerClient(encoded, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runner.Online(ctx)).To(Succeed())
	_, err = runner.Acquire(ctx)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestQueuedJobs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	fake.InstallationID("globex")
	// Run 1: its first job starts, its second (same run, like a matrix) stays queued.
	started := fake.CreateJob("acme/api", []string{"self-hosted", "gpu"})
	sibling := fake.CreateJob("acme/api", []string{"self-hosted", "Linux"}, fakegithub.InRun(started.RunID))
	startJob(t, c, "acme/api", "hf-gpu", []string{"gpu"})
	// Run 2: queued; a job cancelled before it ran is not demand.
	queued := fake.CreateJob("acme/api", []string{"self-hosted", "linux", "x64"}, fakegithub.WithoutQueuedWebhook())
	cancelled := fake.CreateJob("acme/api", []string{"linux"})
	g.Expect(fake.CancelJob(cancelled.ID)).To(Succeed())
	// Another repository of the organization, and another organization.
	web := fake.CreateJob("acme/web", []string{"linux"})
	fake.CreateJob("globex/api", []string{"linux"})

	tests := []struct {
		name  string
		scope platform.Scope
		want  []int64
	}{
		{name: "repository", scope: repoScope("acme/api"), want: []int64{sibling.ID, queued.ID}},
		{name: "organization covers its repositories", scope: orgScope("acme"), want: []int64{sibling.ID, queued.ID, web.ID}},
		{name: "repository wins", scope: platform.Scope{Organization: "acme", Repository: "acme/web"}, want: []int64{web.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			jobs, err := c.QueuedJobs(ctx, tt.scope)
			g.Expect(err).NotTo(HaveOccurred())
			ids := make([]int64, 0, len(jobs))
			for _, j := range jobs {
				ids = append(ids, mustID(j.ID))
				g.Expect(j.State).To(Equal(platform.JobQueued))
			}
			g.Expect(ids).To(ConsistOf(tt.want))
		})
	}

	jobs, err := c.QueuedJobs(ctx, repoScope("acme/api"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(platform.FilterJobs(jobs, []string{"linux", "x64"})).To(ConsistOf(
		platform.Job{ID: formatID(sibling.ID), RunID: formatID(started.RunID), Name: "build", State: platform.JobQueued,
			Labels: []string{"linux", "self-hosted"}, Repository: "acme/api", CreatedAt: sibling.CreatedAt.UTC().Truncate(1e9)},
		HaveField("ID", formatID(queued.ID)),
	))
}

func TestQueuedJobsError(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	fake.CreateJob("acme/api", []string{"linux"})
	fake.FailNext(fakegithub.EndpointWorkflowRunJobs, 1, http.StatusInternalServerError)

	_, err := c.QueuedJobs(context.Background(), repoScope("acme/api"))

	g.Expect(err).To(MatchError(platform.ErrTransient))
}

func TestGetJob(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	job := fake.CreateJob("acme/api", []string{"Linux"}, fakegithub.WithJobName("test"))

	got, err := c.GetJob(context.Background(), repoScope("acme/api"), formatID(job.ID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(And(HaveField("ID", formatID(job.ID)), HaveField("Name", "test"), HaveField("Labels", []string{"linux"})))

	_, err = c.GetJob(context.Background(), repoScope("acme/api"), "1")
	g.Expect(err).To(MatchError(platform.ErrNotFound))
	_, err = c.GetJob(context.Background(), repoScope("acme/api"), "not-a-number")
	g.Expect(err).To(MatchError(platform.ErrInvalid))
	_, err = c.GetJob(context.Background(), orgScope("acme"), formatID(job.ID))
	g.Expect(err).To(MatchError(platform.ErrInvalid))
}

// TestRepairListingKeepsTheBudgetReserve: listing 150 queued runs one by one would spend an
// installation's whole budget of 200 requests an hour, which runner registrations share. The
// repair's listing (QueuedJobs) stops once what is left is down to the reserve (here LowBudget,
// 100: more than 10% of 200) with ErrBudgetReserved and the window's reset time, before GitHub
// would refuse anything; the reserve then still serves a registration. A poll (ActiveJobs) is how
// a pool without webhooks learns of demand and keeps no reserve.
func TestRepairListingKeepsTheBudgetReserve(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{RateLimit: 200}, nil)
	for range 150 {
		fake.CreateJob("acme/api", []string{"linux"}) // each in a run of its own
	}
	id := fake.InstallationID("acme/api")

	_, err := c.QueuedJobs(ctx, repoScope("acme/api"))
	g.Expect(err).To(MatchError(platform.ErrBudgetReserved))
	g.Expect(err.Error()).To(ContainSubstring("kept for runner registrations"))
	at, ok := platform.RetryAt(err)
	g.Expect(ok).To(BeTrue(), "the error says when the budget is renewed")
	g.Expect(at).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute))
	remaining, _ := fake.RateRemaining(id)
	g.Expect(remaining).To(Equal(LowBudget-1), "stopped at the reserve, not at zero")

	_, _, err = jitConfig(c, ctx, repoScope("acme/api"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
	g.Expect(err).NotTo(HaveOccurred(), "the reserve serves a registration")

	jobs, err := c.ActiveJobs(ctx, repoScope("acme/api"))
	g.Expect(err).NotTo(HaveOccurred(), "a poll keeps no reserve")
	g.Expect(jobs).To(HaveLen(150))
}
