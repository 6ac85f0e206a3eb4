package runnerpool_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestRepairLoopRecoversDroppedWebhooks: GitHub does not redeliver webhooks. Jobs whose queued
// webhook never arrived are found by the repair loop in the GitHub API, and provisioned for — and
// no more than that.
func TestRepairLoopRecoversDroppedWebhooks(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	ns := controllertest.NewNamespace(t)
	for range 4 {
		gh.CreateJob("repairs/app", []string{"self-hosted", "linux"}, fakegithub.WithoutQueuedWebhook())
	}
	gh.CreateJob("repairs/app", []string{"self-hosted", "windows"}, fakegithub.WithoutQueuedWebhook())
	pool := controllertest.GitHubPool(t, ns, "repairs", 10, sim, gh)
	// A runner of this pool whose VM died before it deregistered: offline, and no Machine backs it.
	registerRunner(t, gh, "repairs", "linux-stale", platform.PoolRunnerLabel(string(pool.UID)))

	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(got.Status.QueuedJobs).To(Equal(int32(4)), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.LastRepairTime).NotTo(BeNil())
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(4))
	}, 45*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(4), "repeated repairs add nothing; the windows job is not ours")
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Eventually(func() []string {
		var names []string
		for _, r := range gh.Runners() {
			names = append(names, r.Name)
		}
		return names
	}, 10*time.Second, 200*time.Millisecond).ShouldNot(ContainElement("linux-stale"), "the stale runner is deregistered")
}

// TestFiftyWebhooksFiftyVMs: a burst of 50 signed queued deliveries (with duplicates and replays)
// becomes 50 runners, each with its own VM, and nothing more.
func TestFiftyWebhooksFiftyVMs(t *testing.T) {
	if testing.Short() {
		t.Skip("50 VMs take a while on small machines")
	}
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	addr, secret := controllertest.FreeAddr(t), "fifty"
	url := fmt.Sprintf("http://%s/webhooks/github", addr)
	gh := fakegithub.StartForTest(t, fakegithub.Options{WebhookURL: url, WebhookSecret: secret, TLS: true})
	controllertest.StartManagerWith(t, func(c *config.Manager) {
		c.WebhookBindAddress, c.WebhookSecrets, c.RepairInterval = addr, map[platform.Kind]string{platform.KindGitHub: secret}, time.Hour
	})
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "fifty", 60, sim, gh)
	g.Eventually(func(g Gomega) { g.Expect(controllertest.Get(g, pool).Status.Selector).NotTo(BeEmpty()) }, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	for range 50 {
		gh.CreateJob("fifty/app", []string{"self-hosted", "linux"})
	}
	// The fake sends its deliveries in the background.
	g.Eventually(func() int { return len(gh.Deliveries()) }, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 50))
	// Replays of a delivery under new delivery ids, as an attacker or a proxy might send them.
	for _, d := range gh.Deliveries()[:5] {
		code, err := fakegithub.PostWebhook(ctx, http.DefaultClient, url, []byte(secret), "workflow_job", fakegithub.NewDeliveryID(), d.Payload)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(BeNumerically("<", 300))
	}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.QueuedJobs).To(Equal(int32(50)))
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(50))
		g.Expect(len(controllertest.OwnedVMs(sim))).To(Equal(50))
	}, 180*time.Second, time.Second).Should(Succeed())
	t.Logf("50 queued deliveries -> 50 Machines and 50 VMs in %s", time.Since(start).Round(time.Second))
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(50))
		g.Expect(len(controllertest.OwnedVMs(sim))).To(Equal(50))
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
}

// TestBootstrapTimeoutSparesARunnerWithAJob: a runner whose Machine never looked bootstrapped (its
// completion was never recorded) but which registered and took a job is not removed for its
// bootstrap timeout: GitHub, asked first, says it is busy. (The job ledger does not know the job:
// no webhook reached the pool, so only GitHub can tell.)
func TestBootstrapTimeoutSparesARunnerWithAJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	gh.AddRepository("acme/app")
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "acme", 1, sim, gh)
	var name string
	g.Eventually(func(g Gomega) {
		ms := controllertest.PoolMachines(g, pool)
		g.Expect(ms).To(BeEmpty())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	got := controllertest.Get(g, pool)
	floor := client.MergeFrom(got.DeepCopy())
	got.Spec.MinReplicas = 1
	got.Spec.BootstrapTimeout = &metav1.Duration{Duration: 3 * time.Second}
	g.Expect(controllertest.Env.Client.Patch(ctx, got, floor)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ms := controllertest.PoolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1))
		name = ms[0].Name
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// What the bootstrap service did, except recording its completion: the config was issued
	// (long enough ago to count as done) and the runner registered and took a job.
	controllertest.SetRunnerConfigTime(t, ns, name, &metav1.Time{Time: time.Now().Add(-10 * time.Minute)})
	jit := controllertest.RegisterJITRunner(t, gh, "acme", name)
	job := gh.CreateJob("acme/app", []string{"self-hosted", "linux"})
	runner, err := fakegithub.NewRunnerClient(jit, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runner.Online(ctx)).To(Succeed())
	g.Expect(runner.Acquire(ctx)).To(Equal(job.ID))

	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(ConsistOf(HaveField("Name", name)))
	}, 8*time.Second, 250*time.Millisecond).Should(Succeed(), "the busy runner outlives its bootstrap timeout")
	g.Expect(gh.Runners()).To(ConsistOf(HaveField("Name", name)))
}

// registerRunner registers an offline runner named name in org with the App, as the bootstrap
// service does, with the extra labels given.
func registerRunner(t *testing.T, gh *fakegithub.Server, org, name string, labels ...string) {
	t.Helper()
	app, err := github.NewClient(github.Config{BaseURL: gh.URL() + "/", AppID: gh.AppID(), PrivateKeyPEM: gh.AppKeyPEM(),
		Transport: gh.HTTPClient().Transport})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = app.Register(context.Background(), platform.Scope{Organization: org},
		platform.RunnerSpec{Name: name, Labels: append([]string{"linux"}, labels...)})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// TestRepairKeepsOtherPoolsRunners: the repair loop of pool "linux" deregisters its own stale
// runners only. A fresh runner of pool "linux-gpu" (named "linux-gpu-…", so "linux-" starts its
// name), a runner of a same-named pool of another namespace and a runner registered by hand are
// offline and no Machine of "linux" backs them, yet they are not its to remove.
func TestRepairKeepsOtherPoolsRunners(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "siblings", 10, sim, gh)

	others := []string{"linux-gpu-x7k2p", "linux-q9z4m", "linux-by-hand"}
	registerRunner(t, gh, "siblings", others[0], platform.PoolRunnerLabel("uid-of-pool-linux-gpu"))
	registerRunner(t, gh, "siblings", others[1], platform.PoolRunnerLabel("uid-of-pool-linux-in-another-namespace"))
	registerRunner(t, gh, "siblings", others[2])
	registerRunner(t, gh, "siblings", "linux-stale", platform.PoolRunnerLabel(string(pool.UID)))

	runnerNames := func() []string {
		var names []string
		for _, r := range gh.Runners() {
			names = append(names, r.Name)
		}
		return names
	}
	g.Eventually(runnerNames, 20*time.Second, 200*time.Millisecond).ShouldNot(ContainElement("linux-stale"),
		"the pool's own stale runner is deregistered")
	g.Consistently(runnerNames, 3*time.Second, 200*time.Millisecond).Should(ContainElements(others),
		"runners the pool did not register stay, whatever their names")
}

// TestRateLimitedPoolBacksOff: GitHub throttles the pool's repair (a secondary rate limit: 429 with
// Retry-After). The pool says so (PlatformRateLimited with the time calls resume), counts it in
// hyperfleet_platform_rate_limited_total, and calls GitHub no more until then although its repair
// interval is one second: no hot loop.
func TestRateLimitedPoolBacksOff(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	gh.InjectFault(fakegithub.EndpointInstallationRepos, fakegithub.Fault{Times: 1000, Status: http.StatusTooManyRequests, RetryAfter: 40 * time.Second})
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	limited := metrics.PlatformRateLimited.WithLabelValues("github")
	before := testutil.ToFloat64(limited)
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "throttled", 5, sim, gh)

	var retryAt time.Time
	g.Eventually(func(g Gomega) {
		p := controllertest.Get(g, pool)
		c := conditions.Get(p, fleetv1.PlatformRateLimitedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(fleetv1.RateLimitedReason))
		g.Expect(c.Message).To(HavePrefix("RetryAt="), "people read the time in the message")
		g.Expect(p.Status.PlatformRetryTime).NotTo(BeNil())
		retryAt = p.Status.PlatformRetryTime.Time
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(retryAt).To(BeTemporally("~", time.Now().Add(40*time.Second), 15*time.Second))
	calls, refused := gh.Requests(fakegithub.EndpointInstallationRepos), testutil.ToFloat64(limited)
	g.Expect(refused).To(BeNumerically(">", before))
	g.Consistently(func(g Gomega) {
		g.Expect(gh.Requests(fakegithub.EndpointInstallationRepos)).To(Equal(calls), "nothing is sent before RetryAt")
		g.Expect(testutil.ToFloat64(limited)).To(Equal(refused), "no call is even attempted")
	}, 6*time.Second, 500*time.Millisecond).Should(Succeed())
}

// TestRateLimitedScaleDownWaits: GitHub's rate limit is spent when a pool scales down, so the
// runners cannot be deregistered first. The pool keeps them, says when calls resume
// (PlatformRateLimited) and asks GitHub nothing more until then. Before, each refused
// deregistration was returned as an error and retried at once, spending what was left of the
// limit: a soak made ten thousand such calls in ten minutes and stalled for the rest of the hour.
func TestRateLimitedScaleDownWaits(t *testing.T) {
	g := NewWithT(t)
	pool, gh := registeredRunners(t, "spent")

	gh.InjectFault(fakegithub.EndpointOrgRunners, fakegithub.Fault{Times: 1000, RateLimited: true, RetryAfter: 40 * time.Second})
	scalePool(g, pool, 0)
	g.Eventually(func(g Gomega) {
		p := controllertest.Get(g, pool)
		g.Expect(conditions.IsTrue(p, fleetv1.PlatformRateLimitedCondition)).To(BeTrue())
		g.Expect(p.Status.PlatformRetryTime).NotTo(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	calls := gh.Requests(fakegithub.EndpointOrgRunners)
	g.Consistently(func(g Gomega) {
		g.Expect(gh.Requests(fakegithub.EndpointOrgRunners)).To(Equal(calls), "no call before the limit lifts")
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(2), "no runner removed without its deregistration")
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
}

// TestFailedDeregistrationBacksOff: a scale-down whose deregistration GitHub fails (here with
// 502s) keeps the runner and tries again after a backoff, however often the pool is woken
// meanwhile; every event of the pool used to call GitHub again for each runner being removed.
func TestFailedDeregistrationBacksOff(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool, gh := registeredRunners(t, "outage")

	gh.InjectFault(fakegithub.EndpointOrgRunners, fakegithub.Fault{Times: 1000, Status: http.StatusBadGateway, Message: "Server Error"})
	scalePool(g, pool, 0)
	g.Eventually(func() int { return gh.Requests(fakegithub.EndpointOrgRunners) }, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 2))
	time.Sleep(time.Second) // the first failures are recorded
	calls := gh.Requests(fakegithub.EndpointOrgRunners)
	// Wake the pool again and again, as a burst's status changes do: a Machine annotated every 100 ms.
	m := controllertest.PoolMachines(g, pool)[0]
	window := time.Now()
	for i := range 30 {
		got := &clusterv1.Machine{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(&m), got)).To(Succeed())
		base := got.DeepCopy()
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations["test.hyperfleet.io/poke"] = fmt.Sprint(i)
		g.Expect(controllertest.Env.Client.Patch(ctx, got, client.MergeFrom(base))).To(Succeed())
		time.Sleep(100 * time.Millisecond)
	}
	// Retries of one runner are at least 5 s apart: the 30 pokes take about 3 s, so at most one more
	// call per runner; a loaded machine stretches the window and allows one per 5 s of it. Without
	// the backoff every poke calls GitHub again for each runner (60 calls).
	allowed := 2 * (1 + int(time.Since(window)/(5*time.Second)))
	g.Expect(gh.Requests(fakegithub.EndpointOrgRunners)-calls).To(BeNumerically("<=", allowed),
		"no call per event while the backoff runs (%s of pokes)", time.Since(window).Round(time.Millisecond))
	g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(2), "no runner removed without its deregistration")

	// Once GitHub answers again, the runners go.
	gh.ClearFaults()
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(BeEmpty())
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// registeredRunners starts Cluster API, the manager, the Proxmox simulator and a fake GitHub, and
// a GitHub pool of org with two runners that got their runner config long ago: registered, so
// GitHub must let them go before they are removed.
func registeredRunners(t *testing.T, org string) (*fleetv1.RunnerPool, *fakegithub.Server) {
	t.Helper()
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, org, 2, sim, gh)
	scalePool(g, pool, 2)
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(2))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	for _, m := range controllertest.PoolMachines(g, pool) {
		controllertest.SetRunnerConfigTime(t, ns, m.Name, &metav1.Time{Time: time.Now().Add(-10 * time.Minute)})
	}
	return pool, gh
}

// TestRepairPausesToKeepTheBudgetReserve: an installation whose hourly budget (200 requests) a
// repair listing of 150 queued runs would spend stops the listing at the reserve: the pool says
// why (PlatformRateLimited False, reason BudgetReserved), lists nothing more until the budget is
// renewed (status.repairResumeTime), and is not rate-limited, so registrations and
// deregistrations go on.
func TestRepairPausesToKeepTheBudgetReserve(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true, RateLimit: 200})
	for range 150 {
		gh.CreateJob("frugal/other", []string{"windows"}) // queued runs no pool of this test serves
	}
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "frugal", 2, sim, gh)

	g.Eventually(func(g Gomega) {
		p := controllertest.Get(g, pool)
		c := conditions.Get(p, fleetv1.PlatformRateLimitedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleetv1.BudgetReservedReason))
		g.Expect(c.Message).To(ContainSubstring("kept for runner registrations"))
		g.Expect(p.Status.RepairResumeTime).NotTo(BeNil())
		g.Expect(p.Status.PlatformRetryTime).To(BeNil(), "not rate-limited: registrations go on")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(controllertest.Get(g, pool).Status.RepairResumeTime.Time).To(BeTemporally("~", time.Now().Add(time.Hour), 2*time.Minute))
	listed := gh.Requests(fakegithub.EndpointWorkflowRunJobs)
	remaining, _ := gh.RateRemaining(gh.InstallationID("frugal"))
	g.Expect(remaining).To(BeNumerically(">=", 99), "the reserve is left")
	g.Consistently(func() int { return gh.Requests(fakegithub.EndpointWorkflowRunJobs) }, 5*time.Second, 250*time.Millisecond).
		Should(Equal(listed), "no listing before the budget is renewed, at one repair a second")
}

// TestRepairRunsWhenTheManagerStarts: deliveries sent while no manager received them (an upgrade,
// a crash) are not redelivered. A manager's first repair of each pool runs as it starts, however
// recent the last one was, instead of a repair interval later.
func TestRepairRunsWhenTheManagerStarts(t *testing.T) {
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	hour := func(c *config.Manager) { c.RepairInterval = time.Hour }
	stop := controllertest.StartManagerWith(t, hour)
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "restarts", 4, sim, gh)
	var first time.Time
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(got.Status.LastRepairTime).NotTo(BeNil(), "the first manager repairs as it starts")
		first = got.Status.LastRepairTime.Time
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// While no manager runs, two jobs are queued and their deliveries are lost.
	stop()
	// status.lastRepairTime is written at a second's precision: start the next manager in a later
	// second than the first repair, or its repair could not be told from the first.
	time.Sleep(time.Until(first.Truncate(time.Second).Add(time.Second)))
	for range 2 {
		gh.CreateJob("restarts/app", []string{"self-hosted", "linux"}, fakegithub.WithoutQueuedWebhook())
	}
	controllertest.StartManagerWith(t, hour)
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(got.Status.QueuedJobs).To(Equal(int32(2)), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.LastRepairTime.Time).To(BeTemporally(">", first))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the new manager repairs at once, not an hour after the last repair")
}
