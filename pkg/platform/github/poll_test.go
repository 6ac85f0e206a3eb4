package github

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// startPoller runs a Poller for scope, every 30 s of its fake clock, against a fake GitHub over
// HTTPS; setup prepares the fake before the first poll. Each poll's result arrives on the channel.
func startPoller(t *testing.T, scope platform.Scope, setup func(*fakegithub.Server)) (*fakegithub.Server, *Client, *clocktesting.FakeClock, <-chan PollResult) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	fake.InstallationID("acme")
	if setup != nil {
		setup(fake)
	}
	c, err := NewClient(Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM(), Transport: fake.HTTPClient().Transport})
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan PollResult, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	p := &Poller{Client: c, Scope: scope, Interval: 30 * time.Second, Clock: clk,
		Sink: func(_ context.Context, r PollResult) { results <- r }}
	go func() { defer close(done); p.Run(ctx) }()
	return fake, c, clk, results
}

// nextPoll waits for the poller to be asleep, moves the clock by d and returns the next result.
func nextPoll(t *testing.T, clk *clocktesting.FakeClock, results <-chan PollResult, d time.Duration) PollResult {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(clk.HasWaiters, 10*time.Second, 5*time.Millisecond).Should(BeTrue())
	clk.Step(d)
	var r PollResult
	g.Eventually(results, 10*time.Second).Should(Receive(&r))
	return r
}

func jobIDs(jobs []platform.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestPollerConditionalRequestsCostNoRateLimit(t *testing.T) {
	g := NewWithT(t)
	scope := repoScope("acme/api")
	fake, c, clk, results := startPoller(t, scope, func(f *fakegithub.Server) {
		f.CreateJob("acme/api", []string{"self-hosted", "linux"})
	})
	first := <-results
	g.Expect(first.Err).NotTo(HaveOccurred())
	g.Expect(first.Jobs).To(HaveLen(1))
	installation := fake.InstallationID("acme")
	remaining := func() int { n, _ := fake.RateRemaining(installation); return n }
	spent := remaining()
	runListings := fake.Requests(fakegithub.EndpointWorkflowRuns)
	g.Expect(first.Next.Sub(clk.Now())).To(Equal(30 * time.Second))

	// Nothing changed: every GET is answered 304, which costs nothing, and the jobs are the same.
	second := nextPoll(t, clk, results, 30*time.Second)
	g.Expect(second.Err).NotTo(HaveOccurred())
	g.Expect(jobIDs(second.Jobs)).To(Equal(jobIDs(first.Jobs)))
	g.Expect(fake.Requests(fakegithub.EndpointWorkflowRuns)).To(Equal(2 * runListings))
	g.Expect(fake.NotModified(fakegithub.EndpointWorkflowRuns)).To(Equal(runListings))
	g.Expect(fake.NotModified(fakegithub.EndpointWorkflowRunJobs)).To(Equal(1))
	g.Expect(remaining()).To(Equal(spent), "a 304 must not count against the rate limit")
	g.Expect(c.NotModified()).To(BeNumerically(">=", int64(runListings+1)))

	// A new job changes the listings: they are read again (and paid for), and the job shows up.
	added := fake.CreateJob("acme/api", []string{"self-hosted", "linux"})
	third := nextPoll(t, clk, results, 30*time.Second)
	g.Expect(third.Err).NotTo(HaveOccurred())
	g.Expect(jobIDs(third.Jobs)).To(ContainElement(formatID(added.ID)))
	g.Expect(remaining()).To(BeNumerically("<", spent))
}

// The fake answers with GitHub's real clock (go-github compares rate-limit resets with it too),
// so these tests use limits of a few seconds; the poller's own pacing runs on its fake clock.
func TestPollerBacksOffUntilPrimaryRateLimitResets(t *testing.T) {
	g := NewWithT(t)
	fake, _, clk, results := startPoller(t, repoScope("acme/api"), func(f *fakegithub.Server) {
		f.InjectFault(fakegithub.EndpointWorkflowRuns, fakegithub.Fault{RateLimited: true, RetryAfter: 3 * time.Second})
	})
	var limited PollResult
	g.Eventually(results, 10*time.Second).Should(Receive(&limited))
	g.Expect(limited.Err).To(MatchError(platform.ErrRateLimited))
	wait := limited.Next.Sub(clk.Now())
	g.Expect(wait).To(BeNumerically("~", 3*time.Second, 1100*time.Millisecond), "waits for X-RateLimit-Reset")
	g.Expect(wait).To(BeNumerically(">", time.Second))
	assertQuietUntil(t, fake, clk, results, wait)
}

func TestPollerHonoursSecondaryRateLimitRetryAfter(t *testing.T) {
	g := NewWithT(t)
	fake, _, clk, results := startPoller(t, repoScope("acme/api"), func(f *fakegithub.Server) {
		f.InjectFault(fakegithub.EndpointWorkflowRuns, fakegithub.Fault{Status: http.StatusForbidden, RetryAfter: 2 * time.Second})
	})
	var limited PollResult
	g.Eventually(results, 10*time.Second).Should(Receive(&limited))
	g.Expect(limited.Err).To(MatchError(platform.ErrRateLimited))
	g.Expect(limited.Next.Sub(clk.Now())).To(Equal(2*time.Second), "waits for Retry-After")
	assertQuietUntil(t, fake, clk, results, 2*time.Second)
}

// assertQuietUntil checks that a rate-limited poller sends nothing and reports nothing until its
// wait is over (a hot loop would report a result per attempt), then polls successfully and goes
// back to its interval.
func assertQuietUntil(t *testing.T, fake *fakegithub.Server, clk *clocktesting.FakeClock, results <-chan PollResult, wait time.Duration) {
	t.Helper()
	g := NewWithT(t)
	deadline := time.Now().Add(wait)
	before := fake.Requests(fakegithub.EndpointWorkflowRuns)
	g.Eventually(clk.HasWaiters, 10*time.Second, 5*time.Millisecond).Should(BeTrue())
	clk.Step(wait - 500*time.Millisecond)
	g.Consistently(results, 300*time.Millisecond).ShouldNot(Receive())
	g.Expect(fake.Requests(fakegithub.EndpointWorkflowRuns)).To(Equal(before))
	time.Sleep(time.Until(deadline) + 1100*time.Millisecond) // GitHub's own clock passes the reset
	after := nextPoll(t, clk, results, 500*time.Millisecond)
	g.Expect(after.Err).NotTo(HaveOccurred())
	g.Expect(fake.Requests(fakegithub.EndpointWorkflowRuns)).To(BeNumerically(">", before))
	g.Expect(after.Next.Sub(clk.Now())).To(Equal(30 * time.Second))
}

func TestPollerBacksOffExponentiallyOnErrors(t *testing.T) {
	g := NewWithT(t)
	fake, _, clk, results := startPoller(t, repoScope("acme/api"), nil)
	<-results
	fake.FailNext(fakegithub.EndpointWorkflowRuns, 3, http.StatusBadGateway)
	var waits []time.Duration
	step := 30 * time.Second
	for range 3 {
		r := nextPoll(t, clk, results, step)
		g.Expect(r.Err).To(MatchError(platform.ErrTransient))
		step = r.Next.Sub(clk.Now())
		waits = append(waits, step)
	}
	g.Expect(waits).To(Equal([]time.Duration{MinBackoff, 2 * MinBackoff, 4 * MinBackoff}))
	ok := nextPoll(t, clk, results, step)
	g.Expect(ok.Err).NotTo(HaveOccurred())
}

// A budget that runs low stops the poller until X-RateLimit-Reset before GitHub refuses it,
// leaving what is left of the window to runner registrations.
func TestPollerWaitsForResetWhenBudgetRunsLow(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	fake := fakegithub.StartForTest(t, fakegithub.Options{TLS: true, RateLimit: LowBudget + 2})
	fake.InstallationID("acme")
	c, err := NewClient(Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM(), Transport: fake.HTTPClient().Transport})
	g.Expect(err).NotTo(HaveOccurred())
	p := &Poller{Client: c, Scope: repoScope("acme/api"), Interval: 30 * time.Second, Clock: clk}
	var backoff time.Duration
	res := p.pollOnce(context.Background(), clk, p.Interval, &backoff)
	g.Expect(res.Err).NotTo(HaveOccurred())
	remaining, _ := c.RateLimitRemaining()
	g.Expect(remaining).To(BeNumerically("<", LowBudget))
	reset, ok := c.RateLimitReset()
	g.Expect(ok).To(BeTrue())
	g.Expect(res.Next).To(Equal(reset))
	g.Expect(res.Next.Sub(clk.Now())).To(BeNumerically(">", 50*time.Minute))
}
