package runnerpool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/controllers/runnerpool"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestPolledDemandFeedsTheLedgerOnce: a poll's jobs are routed to the pool that serves their
// labels and recorded once however often they are polled; a job in progress marks its runner
// busy; a held job is no demand; a refused poll sets PlatformRateLimited until the time the
// platform named, in the form the repair loop honours, and the next poll clears it.
func TestPolledDemandFeedsTheLedgerOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := controllertest.NewNamespace(t)
	mk := func(name string, labels ...string) *fleetv1.RunnerPool {
		p := builder.NewRunnerPool(name, ns).WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Labels: labels,
			CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}, Demand: fleetv1.GitHubDemandPolling}).Build()
		g.Expect(controllertest.Env.Client.Create(ctx, p)).To(Succeed())
		return p
	}
	linux, gpu := mk("linux", "linux"), mk("gpu", "linux", "gpu")
	store := demand.NewStore(controllertest.Env.Client)
	var woken []types.NamespacedName
	feed := &runnerpool.PolledDemand{Client: controllertest.Env.Client, Demand: store, Notify: func(k types.NamespacedName) { woken = append(woken, k) }}
	pools := []types.NamespacedName{client.ObjectKeyFromObject(linux), client.ObjectKeyFromObject(gpu)}
	job := func(id string, state platform.JobState, runner string, labels ...string) platform.Job {
		return platform.Job{ID: id, State: state, Labels: labels, Repository: "acme/api", RunnerName: runner}
	}
	jobs := []platform.Job{
		job("1", platform.JobQueued, "", "self-hosted", "linux"),
		job("2", platform.JobQueued, "", "self-hosted", "linux", "gpu"),
		job("3", platform.JobWaiting, "", "self-hosted", "linux"),
		job("4", platform.JobInProgress, "linux-abcde", "self-hosted", "linux"),
	}
	poll := platform.PolledDemand{Kind: platform.KindGitHub, Installation: "42", Pools: pools, Jobs: jobs}
	for range 3 {
		feed.Feed(ctx, poll)
	}
	d, err := store.Snapshot(ctx, linux)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(1), "job 1 once; job 2 is the gpu pool's; job 3 is held")
	g.Expect(d.Jobs["3"].State).To(Equal(platform.JobWaiting))
	g.Expect(d.Busy).To(HaveKeyWithValue("linux-abcde", "4"))
	d, err = store.Snapshot(ctx, gpu)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(1))
	g.Expect(woken).To(ConsistOf(pools[0], pools[1]), "only the first poll changed demand")

	// Job 1 is taken elsewhere or cancelled: one poll that does not list it is no proof (a paged
	// listing can miss a job); after two in a row it is no demand.
	poll.Jobs = jobs[1:]
	feed.Feed(ctx, poll)
	d, err = store.Snapshot(ctx, linux)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(1))
	feed.Feed(ctx, poll)
	d, err = store.Snapshot(ctx, linux)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())

	// Refused: PlatformRateLimited until the platform's time, which the repair loop reads.
	retry := time.Now().Add(5 * time.Minute)
	feed.Feed(ctx, platform.PolledDemand{Kind: platform.KindGitHub, Installation: "42", Pools: pools, Next: retry,
		Err: &platform.Error{Class: platform.ErrRateLimited, Op: "list queued workflow runs", StatusCode: 403, Err: context.DeadlineExceeded}})
	for _, p := range []*fleetv1.RunnerPool{linux, gpu} {
		got := &fleetv1.RunnerPool{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(conditions.Get(got, fleetv1.PlatformRateLimitedCondition)).To(HaveField("Reason", fleetv1.RateLimitedReason))
		msg, ok := strings.CutPrefix(conditions.Get(got, fleetv1.PlatformRateLimitedCondition).Message, "RetryAt=")
		g.Expect(ok).To(BeTrue(), "the repair loop reads the time after RetryAt=")
		at, err := time.Parse(time.RFC3339, strings.SplitN(msg, ": ", 2)[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(at).To(BeTemporally("~", retry, 2*time.Second))
	}
	feed.Feed(ctx, poll)
	got := &fleetv1.RunnerPool{}
	g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(linux), got)).To(Succeed())
	g.Expect(conditions.Get(got, fleetv1.PlatformRateLimitedCondition)).To(HaveField("Status", metav1.ConditionFalse))
}
