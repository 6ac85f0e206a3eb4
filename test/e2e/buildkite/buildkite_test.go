package buildkite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

var fleet *devfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (Buildkite): skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e-buildkite", devfleet.Options{
		Platform:    devfleet.PlatformBuildkite,
		Pool:        devfleet.PoolOptions{Min: 1, Max: 3},
		JobDuration: time.Second,
		NoConsole:   true,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}

const jobs = 6

// TestBuildkiteJobsRunOnceEachOnItsOwnVM: N scheduled jobs of the pool's queue each run exactly
// once, each on a VM of its own registered with its own agent token; a job held behind a wait
// step and a job of another queue boot nothing; the pool never exceeds its maximum and returns
// to its floor, where only the floor VM's agent token is left.
func TestBuildkiteJobsRunOnceEachOnItsOwnVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	bk := fleet.Buildkite
	ns := fleet.State.Namespace
	poolLabels := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: fleet.State.Pool}

	g.Eventually(func(g Gomega) {
		g.Expect(live(g, c, ns, poolLabels)).To(HaveLen(1))
		claims := &infrav1.MachineClaimList{}
		g.Expect(c.List(ctx, claims, client.InNamespace(ns), poolLabels)).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1))
		g.Expect(claims.Items[0].Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
		g.Expect(bk.ClusterTokens()).To(HaveLen(1), "the floor VM registered with its own agent token")
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "the pool reaches its floor of one registered runner")

	held := bk.CreateJob(devfleet.DefaultPipeline, []string{"queue=" + devfleet.DefaultQueue}, fakebuildkite.WithState(fakebuildkite.JobWaiting))
	other := bk.CreateJob(devfleet.DefaultPipeline, []string{"queue=macos"})
	created, err := devfleet.CreateBuildkiteJobs(ctx, &fleet.State, devfleet.BuildkiteJobRequest{Count: jobs, Name: "e2e"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(HaveLen(jobs))

	maxLive := 0
	g.Eventually(func(g Gomega) {
		maxLive = max(maxLive, len(live(g, c, ns, poolLabels)))
		done := 0
		for _, j := range created {
			got, ok := bk.GetJob(j.ID)
			g.Expect(ok).To(BeTrue())
			if got.State == fakebuildkite.JobFinished {
				done++
			}
		}
		g.Expect(done).To(Equal(jobs))
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), "every job finishes")
	g.Expect(maxLive).To(BeNumerically("<=", 3), "the pool never exceeds its maximum")

	agents := map[string]fakebuildkite.Agent{}
	for _, a := range bk.Agents() {
		agents[a.ID] = a
	}
	tokens, names := map[string]bool{}, map[string]bool{}
	for _, j := range created {
		got, _ := bk.GetJob(j.ID)
		g.Expect(got.Acquisitions).To(Equal(1), "job %s ran once", j.ID)
		a := agents[got.AgentID]
		g.Expect(a.JobsRun).To(Equal(1), "agent %s ran only this job", a.Name)
		g.Expect(tokens[a.TokenID]).To(BeFalse(), "each VM has its own agent token")
		g.Expect(names[a.Name]).To(BeFalse(), "each job ran on its own VM")
		tokens[a.TokenID], names[a.Name] = true, true
	}
	for _, j := range []fakebuildkite.Job{held, other} {
		got, _ := bk.GetJob(j.ID)
		g.Expect(got.Acquisitions).To(BeZero())
	}

	// Back to the floor: one Machine, one VM, and one agent token, the floor VM's.
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "only the floor's Machine is left")
		owned, _ := devfleet.SplitVMs(fleet.Simulator.VMs())
		g.Expect(owned).To(HaveLen(1), "only the floor's VM is left")
		toks := bk.ClusterTokens()
		g.Expect(toks).To(HaveLen(1), "the tokens of the VMs that went are deleted")
		g.Expect(toks[0].Description).To(ContainSubstring(machines.Items[0].Name))
		pool := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.State.Pool}, pool)).To(Succeed())
		g.Expect(pool.Status.QueuedJobs).To(BeZero(), "the held job is not demand")
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed(), "the pool returns to its floor")

	for _, d := range bk.Deliveries() {
		g.Expect(d.StatusCode).To(BeNumerically("<", 300), "the receiver accepted the signed %s of %s", d.Event, d.JobID)
	}
	g.Expect(strings.HasSuffix(fleet.State.Buildkite.WebhookURL, "/webhooks/buildkite")).To(BeTrue())
}

func live(g Gomega, c client.Client, ns string, labels client.MatchingLabels) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(ns), labels)).To(Succeed())
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}
