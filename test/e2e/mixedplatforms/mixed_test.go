package mixedplatforms

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/history/recorder"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
	"github.com/hyperfleet-io/hyperfleet/test/pgtest"
)

var (
	fleet *devfleet.Fleet
	// historyDB is the PostgreSQL server the fleet keeps its job records in, and historyURL its
	// database.
	historyDB  *pgtest.Server
	historyURL string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (mixed platforms): skipped in -short mode")
		os.Exit(0)
	}
	var (
		stop func()
		err  error
	)
	historyDB, historyURL, stop, err = pgtest.ForMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e (mixed platforms): starting PostgreSQL for the job history:", err)
		os.Exit(1)
	}
	code := devfleet.RunTests("e2e-mixed", devfleet.Options{
		Platform:    devfleet.PlatformAll,
		Pool:        devfleet.PoolOptions{Min: 1, Max: maxReplicas},
		JobDuration: time.Second,
		NoConsole:   true,
		HistoryURL:  historyURL,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() })
	stop()
	os.Exit(code)
}

const (
	// jobs per platform.
	jobs        = 3
	maxReplicas = 4
)

// TestEveryPlatformsJobsRunOnTheirOwnPool queues jobs on GitHub, GitLab and Buildkite at once.
// Each job runs exactly once, on a VM of its own, of its own platform's pool; no pool ever
// counts another platform's jobs as demand, no runner of one platform is registered for another
// platform's pool, every delivery went to its own platform's route and was accepted, and every
// pool returns to its floor. The job history's PostgreSQL is down for a while in the middle of the
// burst; once the VMs are gone every job has a complete record, signed, that verifies with the
// installation's public key alone (checkRecords).
func TestEveryPlatformsJobsRunOnTheirOwnPool(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	s := &fleet.State
	ns := s.Namespace

	pools := map[string]devfleet.PoolState{}
	for _, p := range devfleet.Platforms {
		pool, ok := s.PoolOf(p)
		g.Expect(ok).To(BeTrue(), "the mixed fleet has a %s pool", p)
		pools[p] = pool
	}
	g.Expect(s.Pools).To(HaveLen(3))
	// poolOf is the pool a Machine (or a runner named after it) belongs to, by the pool-name
	// prefix every Machine of a pool gets.
	poolOf := func(name string) string {
		for p, pool := range pools {
			if strings.HasPrefix(name, pool.Name+"-") {
				return p
			}
		}
		return ""
	}

	floors := func(g Gomega) {
		for p, pool := range pools {
			g.Expect(live(g, c, ns, pool.Name)).To(HaveLen(1), "the %s pool holds its floor", p)
		}
		g.Expect(fleet.GitHub.Runners()).To(HaveLen(1))
		g.Expect(fleet.GitLab.Runners()).To(HaveLen(1))
		g.Expect(fleet.Buildkite.ClusterTokens()).To(HaveLen(1))
	}
	g.Eventually(floors, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), "each pool reaches its floor of one registered runner")

	// Every platform's jobs at once.
	var (
		wg                  sync.WaitGroup
		ghJobs, glJobs      []devfleet.Job
		bkJobs              []devfleet.BuildkiteJob
		ghErr, glErr, bkErr error
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		ghJobs, ghErr = devfleet.CreateJobs(ctx, s, devfleet.JobRequest{Platform: devfleet.PlatformGitHub, Count: jobs, Labels: pools[devfleet.PlatformGitHub].Labels, Name: "gh"})
	}()
	go func() {
		defer wg.Done()
		glJobs, glErr = devfleet.CreateJobs(ctx, s, devfleet.JobRequest{Platform: devfleet.PlatformGitLab, Count: jobs, Labels: pools[devfleet.PlatformGitLab].Labels, Name: "gl"})
	}()
	go func() {
		defer wg.Done()
		bkJobs, bkErr = devfleet.CreateBuildkiteJobs(ctx, s, devfleet.BuildkiteJobRequest{Count: jobs, Name: "bk"})
	}()
	// The history database goes down while the jobs are picked up and run, until the pools say so.
	historyDB.Stop(t)
	wg.Wait()
	g.Expect([]error{ghErr, glErr, bkErr}).To(HaveEach(Succeed()))
	g.Eventually(func(g Gomega) {
		rp := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pools[devfleet.PlatformGitHub].Name}, rp)).To(Succeed())
		cond := conditions.Get(rp, fleetv1.HistoryRecordedCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(fleetv1.HistoryStoreUnavailableReason))
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "the pool says its job records wait for the history store")
	historyDB.Restart(t)
	g.Expect(ghJobs).To(HaveLen(jobs))
	g.Expect(glJobs).To(HaveLen(jobs))
	g.Expect(bkJobs).To(HaveLen(jobs))

	// While they run, no pool may see more demand than its own platform's jobs.
	maxQueued := map[string]int32{}
	ran := map[string]map[string]bool{} // platform -> the Machines its jobs ran on
	g.Eventually(func(g Gomega) {
		for p, pool := range pools {
			rp := &fleetv1.RunnerPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool.Name}, rp)).To(Succeed())
			maxQueued[p] = max(maxQueued[p], rp.Status.QueuedJobs)
			g.Expect(len(live(g, c, ns, pool.Name))).To(BeNumerically("<=", maxReplicas))
		}
		ran = map[string]map[string]bool{}
		ran[devfleet.PlatformGitHub] = finished(g, ctx, devfleet.PlatformGitHub, ghJobs, "success")
		ran[devfleet.PlatformGitLab] = finished(g, ctx, devfleet.PlatformGitLab, glJobs, string(fakegitlab.JobSuccess))
		ran[devfleet.PlatformBuildkite] = finishedBuildkite(g, bkJobs)
	}, 5*time.Minute, 250*time.Millisecond).Should(Succeed(), "every platform's jobs finish")

	for p, machines := range ran {
		g.Expect(machines).To(HaveLen(jobs), "each %s job ran on a VM of its own", p)
		for m := range machines {
			g.Expect(poolOf(m)).To(Equal(p), "%s job ran on %s, a VM of the %s pool", p, m, p)
		}
	}
	for p, q := range maxQueued {
		g.Expect(q).To(BeNumerically("<=", jobs), "the %s pool counted only its own platform's jobs as demand", p)
	}

	// No runner of one platform was made for another platform's pool, and every delivery went
	// to its own platform's route.
	for _, r := range fleet.GitHub.Runners() {
		g.Expect(poolOf(r.Name)).To(Equal(devfleet.PlatformGitHub), "GitHub runner %s", r.Name)
	}
	for _, r := range fleet.GitLab.Runners() {
		g.Expect(r.Description).To(ContainSubstring(pools[devfleet.PlatformGitLab].Name+"-"), "GitLab runner %s", r.Description)
	}
	for _, a := range fleet.Buildkite.Agents() {
		g.Expect(poolOf(a.Name)).To(Equal(devfleet.PlatformBuildkite), "Buildkite agent %s", a.Name)
	}
	for _, tok := range fleet.Buildkite.ClusterTokens() {
		g.Expect(tok.Description).To(ContainSubstring(pools[devfleet.PlatformBuildkite].Name + "-"))
	}
	for _, d := range fleet.GitHub.Deliveries() {
		g.Expect(d.StatusCode).To(BeNumerically("<", 300), "the receiver accepted GitHub's %s %s of job %d", d.Event, d.Action, d.JobID)
	}
	for _, d := range fleet.GitLab.Deliveries() {
		g.Expect(d.StatusCode).To(BeNumerically("<", 300), "the receiver accepted a GitLab Job Hook")
	}
	for _, d := range fleet.Buildkite.Deliveries() {
		g.Expect(d.StatusCode).To(BeNumerically("<", 300), "the receiver accepted Buildkite's %s of %s", d.Event, d.JobID)
	}
	g.Expect(s.Webhook.URL).To(HaveSuffix("/webhooks/github"))
	g.Expect(s.GitLab.WebhookURL).To(HaveSuffix("/webhooks/gitlab"))
	g.Expect(s.Buildkite.WebhookURL).To(HaveSuffix("/webhooks/buildkite"))

	// Every pool back at its floor: one Machine each, one VM each, one runner on each platform.
	g.Eventually(func(g Gomega) {
		floors(g)
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(len(pools)), "only the floors' Machines are left")
		owned, _ := devfleet.SplitVMs(fleet.Simulator.VMs())
		g.Expect(owned).To(HaveLen(len(pools)), "only the floors' VMs are left")
		for p, pool := range pools {
			rp := &fleetv1.RunnerPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool.Name}, rp)).To(Succeed())
			g.Expect(rp.Status.QueuedJobs).To(BeZero(), "the %s pool has no demand left", p)
		}
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed(), "every pool returns to its floor")

	ids := map[string]string{} // job record ID -> platform
	for _, j := range ghJobs {
		ids[fmt.Sprintf("github/%d", j.ID)] = devfleet.PlatformGitHub
	}
	for _, j := range glJobs {
		ids[fmt.Sprintf("gitlab/%d", j.ID)] = devfleet.PlatformGitLab
	}
	for _, j := range bkJobs {
		ids["buildkite/"+j.ID] = devfleet.PlatformBuildkite
	}
	checkRecords(t, ids, pools, poolOf)
	g.Eventually(func(g Gomega) {
		for _, pool := range pools {
			rp := &fleetv1.RunnerPool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool.Name}, rp)).To(Succeed())
			g.Expect(conditions.IsTrue(rp, fleetv1.HistoryRecordedCondition)).To(BeTrue(), "pool %s records again", pool.Name)
		}
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// checkRecords: every job's record in the history database is complete (the job, its pool and
// runner, the VM, its template, the identity it attested with, every time of its life, the
// outcome) and sealed, its envelope verifies with the public key the installation publishes and
// holds exactly the stored record; the manager's audit log has the creation and destruction of
// each job's VM; and the outage lost nothing (no drop counted) though writes failed meanwhile.
func checkRecords(t *testing.T, ids map[string]string, pools map[string]devfleet.PoolState, poolOf func(string) string) {
	g := NewWithT(t)
	ctx := context.Background()
	store, err := history.Open(ctx, historyURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	records := map[string]history.JobRecord{}
	g.Eventually(func(g Gomega) {
		for id := range ids {
			rec, err := store.Job(ctx, id)
			g.Expect(err).NotTo(HaveOccurred(), "job %s has a record", id)
			g.Expect(rec.Sealed()).To(BeTrue(), "job %s's record is sealed", id)
			records[id] = rec
		}
	}, 2*time.Minute, time.Second).Should(Succeed(), "every job's record is sealed once its VM is gone")

	keys, err := custody.PublicKeys(ctx, fleet.Client(), fleet.Installation.Namespace)
	g.Expect(err).NotTo(HaveOccurred(), "the installation publishes its public key")
	for id, rec := range records {
		p := ids[id]
		g.Expect(rec.Platform).To(Equal(p))
		g.Expect(rec.Namespace).To(Equal(fleet.State.Namespace))
		g.Expect(rec.Pool).To(Equal(pools[p].Name), "job %s", id)
		g.Expect(poolOf(rec.Runner)).To(Equal(p), "job %s ran on its own pool's runner %q", id, rec.Runner)
		g.Expect(rec.Repository).NotTo(BeEmpty(), "job %s", id)
		g.Expect(rec.JobURL).To(HavePrefix("http"), "job %s has its page's URL", id)
		g.Expect(rec.VM).To(MatchFields(IgnoreExtras, Fields{
			"Provider": Equal("proxmox"), "HypervisorCluster": Not(BeEmpty()), "Host": Not(BeEmpty()), "VMID": Not(BeEmpty()),
			"Name": Equal(rec.Runner)}), "job %s", id)
		g.Expect(rec.Template.ID).NotTo(BeEmpty(), "job %s", id)
		g.Expect(rec.Template.Digest).To(MatchRegexp(`^sha1:[0-9a-f]{40}$`), "job %s: the template's config digest as PVE reported it", id)
		g.Expect(rec.Identity.SPIFFEID).To(HaveSuffix("/"+rec.Runner), "job %s", id)
		g.Expect(rec.Identity.SVIDSerial).NotTo(BeEmpty(), "job %s", id)
		g.Expect(rec.Identity.SVIDFingerprint).To(HavePrefix("sha256:"), "job %s", id)
		tm := rec.Times
		for name, v := range map[string]*time.Time{"queued": tm.Queued, "vmRequested": tm.VMRequested, "cloned": tm.Cloned,
			"booted": tm.Booted, "attested": tm.Attested, "jobStarted": tm.JobStarted, "jobFinished": tm.JobFinished,
			"vmDestroyed": tm.VMDestroyed} {
			g.Expect(v).NotTo(BeNil(), "job %s: %s", id, name)
		}
		g.Expect(tm.VMDestroyed.Before(*tm.JobFinished)).To(BeFalse(), "job %s: its VM went after the job", id)
		g.Expect(rec.Outcome).To(Equal(history.OutcomeSucceeded), "job %s", id)

		var env provenance.Envelope
		g.Expect(json.Unmarshal(rec.Envelope, &env)).To(Succeed())
		st, err := provenance.Verify(env, keys...)
		g.Expect(err).NotTo(HaveOccurred(), "job %s's record verifies", id)
		var signed history.JobRecord
		g.Expect(json.Unmarshal(st.Predicate, &signed)).To(Succeed())
		g.Expect(signed).To(Equal(recorder.Signed(rec)), "job %s: the signature covers the stored record", id)

		entries, err := store.Audit(ctx, history.AuditQuery{Kind: "MachineClaim", Name: rec.Runner})
		g.Expect(err).NotTo(HaveOccurred())
		var actions []string
		for _, e := range entries {
			actions = append(actions, e.Action)
			g.Expect(e.Actor.Kind).To(Equal(history.ActorController))
		}
		g.Expect(actions).To(ContainElements("create-vm", "destroy-vm"), "the audit log has job %s's VM", id)
	}

	resp, err := http.Get(fleet.State.Manager.MetricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(metrics)).To(MatchRegexp(`(?m)^hyperfleet_history_writes_total\{result="error"\} [1-9]`), "the outage showed in the metrics")
	g.Expect(string(metrics)).To(MatchRegexp(`(?m)^hyperfleet_history_dropped_records_total 0$`), "and lost nothing")
	g.Expect(string(metrics)).To(MatchRegexp(`(?m)^hyperfleet_history_store_up 1$`))
}

// finished checks that every one of created (GitHub or GitLab) completed with conclusion, each
// taken once, and returns the Machines they ran on.
func finished(g Gomega, ctx context.Context, platform string, created []devfleet.Job, conclusion string) map[string]bool {
	all, err := devfleet.ListJobsOf(ctx, &fleet.State, platform)
	g.Expect(err).NotTo(HaveOccurred())
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	machines := map[string]bool{}
	for _, j := range all {
		if !ids[j.ID] {
			continue
		}
		g.Expect(j.Conclusion).NotTo(BeNil(), "%s job %d is finished", platform, j.ID)
		g.Expect(*j.Conclusion).To(Equal(conclusion))
		g.Expect(j.Acquisitions).To(Equal(1), "%s job %d ran once", platform, j.ID)
		g.Expect(j.RunnerName).NotTo(BeNil())
		machines[*j.RunnerName] = true
	}
	return machines
}

// finishedBuildkite checks that every Buildkite job finished, once, on an agent that ran only
// it, and returns the agents' names (their Machines).
func finishedBuildkite(g Gomega, created []devfleet.BuildkiteJob) map[string]bool {
	agents := map[string]fakebuildkite.Agent{}
	for _, a := range fleet.Buildkite.Agents() {
		agents[a.ID] = a
	}
	machines := map[string]bool{}
	for _, j := range created {
		got, ok := fleet.Buildkite.GetJob(j.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(got.State).To(Equal(fakebuildkite.JobFinished), "Buildkite job %s is finished", j.ID)
		g.Expect(got.Acquisitions).To(Equal(1), "Buildkite job %s ran once", j.ID)
		a := agents[got.AgentID]
		g.Expect(a.JobsRun).To(Equal(1), "agent %s ran only this job", a.Name)
		machines[a.Name] = true
	}
	return machines
}

// live is pool's Machines not being deleted.
func live(g Gomega, c client.Client, ns, pool string) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool})).To(Succeed())
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}
