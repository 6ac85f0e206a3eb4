package polling

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

var fleet *devfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (GitHub polling): skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e-polling", devfleet.Options{
		Pool: devfleet.PoolOptions{Min: 1, Max: 3, Labels: []string{"linux", "x64"},
			GitHubDemand: fleetv1.GitHubDemandPolling, PollInterval: 10 * time.Second},
		// The repair loop also reads the API; an hour apart, only the poller can find the jobs.
		RepairInterval: time.Hour,
		JobDuration:    time.Second,
		NoConsole:      true,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}

const jobs = 4

// TestPollingOnlyPoolRunsEachJobOnce queues jobs with no webhook anywhere: the leader's poller
// finds them, each runs once on its own VM, and the pool returns to its floor.
func TestPollingOnlyPoolRunsEachJobOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns, pool := fleet.State.Namespace, fleet.State.Pool

	// No GitHub webhook secret is configured: the receiver accepts no GitHub delivery.
	if u := fleet.State.Webhook.URL; u != "" {
		resp, err := http.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(BeElementOf(http.StatusUnauthorized, http.StatusNotFound), "no GitHub delivery is accepted")
		}
	}
	g.Eventually(func() []fakegithub.Runner { return fleet.GitHub.Runners() }, 2*time.Minute, 250*time.Millisecond).
		Should(HaveLen(1), "the floor's runner")

	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: jobs, Labels: []string{"linux", "x64"}, Name: "polled"})
	g.Expect(err).NotTo(HaveOccurred())
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	g.Expect(fleet.GitHub.Deliveries()).To(BeEmpty(), "the fake GitHub sends no webhook")

	g.Eventually(func(g Gomega) {
		done := 0
		for _, j := range fleet.GitHub.Jobs() {
			if ids[j.ID] && j.Status == fakegithub.JobCompleted {
				done++
			}
		}
		g.Expect(done).To(Equal(jobs))
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed(), "every job completes")
	g.Expect(fleet.GitHub.VerifyEachJobRanOnce()).To(Succeed())

	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "only the floor's Machine is left")
		p := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, p)).To(Succeed())
		g.Expect(p.Status.DesiredReplicas).To(BeEquivalentTo(1))
		g.Expect(fleet.GitHub.Runners()).To(HaveLen(1), "only the floor's runner is registered")
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the pool returns to its floor")

	// Once nothing changes, the poller's listings are answered 304 Not Modified, free of rate limit.
	g.Eventually(func() int { return fleet.GitHub.NotModified(fakegithub.EndpointWorkflowRuns) }, time.Minute, time.Second).
		Should(BeNumerically(">", 0), "unchanged listings are answered 304")
}
