package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// envInt reads a positive integer setting, def when unset.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

// TestBenchScale is `make bench-scale`: HYPERFLEET_BENCH_SCALE_N jobs queued at once by webhook
// against a RunnerPool of max N, through HyperFleet's manager (a process of its own), the real
// Cluster API manager and kube-apiserver, the bootstrap service, the fake GitHub (with GitHub's
// JIT rate limit) and the Proxmox simulator with its load model on over three nodes. Every VM's
// guest attests, fetches its runner config and takes a job, and keeps it until all N jobs run;
// then every job finishes, every VM powers itself off and the sweep destroys them. It writes
// bench-scale.md (HYPERFLEET_BENCH_SCALE_REPORT) and fails on a job lost or run twice, a VM left,
// a lock-timeout storm, or throughput below 90% of the model's clone ceiling.
func TestBenchScale(t *testing.T) {
	if os.Getenv("HYPERFLEET_BENCH_SCALE") == "" {
		t.Skip("run by make bench-scale (HYPERFLEET_BENCH_SCALE=1)")
	}
	g := NewWithT(t)
	n := envInt(t, "HYPERFLEET_BENCH_SCALE_N", 1000)
	model := pvesim.DefaultLoadModel()
	model.TimeScale = float64(envInt(t, "HYPERFLEET_BENCH_SCALE_TIME_SCALE", 4))
	timeout := time.Duration(envInt(t, "HYPERFLEET_BENCH_SCALE_TIMEOUT_MINUTES", 40)) * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	dir := t.TempDir()
	if keep := os.Getenv("HYPERFLEET_SCALE_LOGS"); keep != "" {
		dir = keep
		g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	}
	gs := newGuests(true, time.Second, 30*time.Minute)
	// Cluster API's own settings (make bench-scale raises its client's 20 requests a second, which
	// a thousand Machines exhaust: see docs/performance.md).
	capiArgs := strings.Fields(os.Getenv("HYPERFLEET_BENCH_SCALE_CAPI_ARGS"))
	startedAt := time.Now()
	h, err := start(ctx, options{dir: dir, minRunners: 0, maxRunners: int32(n), model: model, guests: gs,
		jitPerWindow: 175, foreign: 6, capiArgs: capiArgs})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.stop()
	g.Expect(h.hypervisorClusterAvailable(ctx, 2*time.Minute)).To(Succeed())
	setup := time.Since(startedAt)
	hc := &infrav1.HypervisorCluster{}
	g.Expect(h.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "pve"}, hc)).To(Succeed())
	limits := fmt.Sprintf("HypervisorCluster limits (defaults): %d clones per host, %d clones and destroys per storage, %d deletes per host",
		hc.Spec.Limits.ClonesPerHost, hc.Spec.Limits.TasksPerStorage, hc.Spec.Limits.DeletesPerHost)
	foreignBefore := foreignVMs(h.sim)

	apiBefore, apiKindsBefore, err := apiserverRequests(ctx, h.env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	simBefore := h.sim.LoadStats()
	cpuBefore, _ := h.manager.usage()

	// The burst: N jobs queued at once; the fake GitHub delivers each queued webhook.
	burst := time.Now()
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		h.manager.profileCPU(ctx, 3*time.Minute, filepath.Join(dir, "manager-cpu-burst.pprof"), t.Logf)
	}()
	defer func() { <-profiled }()
	ids := map[int64]bool{}
	for range n {
		ids[h.github.CreateJob(repo, runnerLabels).ID] = true
	}
	var allCloned, allRunning time.Duration
	for allRunning == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the burst did not finish in %s: %d VMs cloned, %d jobs running; logs in %s",
				timeout, len(ownedVMs(h.sim)), running(h.github, ids), dir)
		}
		time.Sleep(time.Second)
		if allCloned == 0 && h.sim.LoadStats().Clones-simBefore.Clones >= n {
			allCloned = time.Since(burst) // N clone tasks ended OK
		}
		if running(h.github, ids) == n {
			allRunning = time.Since(burst)
		}
	}
	if allCloned == 0 {
		allCloned = allRunning
	}
	// Every job has a VM; what the burst cost.
	cpuBurst, rssBurst := h.manager.usage()
	apiBurst, _, err := apiserverRequests(ctx, h.env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	simBurst := h.sim.LoadStats()
	cloneLatency := webhookToClone(h.github.Deliveries(), h.clones)
	boot := bootstrapFigures(gs.snapshot())

	// The naive way beside the sweep's one listing: every VM's status read on its own, once.
	simBeforeNaive := h.sim.LoadStats()
	naive := measurePerVMPolling(ctx, h)
	naiveCalls := calls(h.sim.LoadStats()) - calls(simBeforeNaive)

	// Power-off → destroyed: every job finishes, every VM powers itself off, the sweep (default
	// interval) finds them and the claims delete them.
	simBeforeOff := h.sim.LoadStats()
	off := time.Now()
	gs.release()
	var destroyed time.Duration
	for destroyed == 0 {
		if ctx.Err() != nil {
			t.Fatalf("VMs not destroyed in time: %d left; logs in %s", len(ownedVMs(h.sim)), dir)
		}
		time.Sleep(500 * time.Millisecond)
		if len(ownedVMs(h.sim)) == 0 {
			destroyed = time.Since(off)
		}
	}
	simAfter := h.sim.LoadStats()
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(h.env.Client.List(ctx, machines, client.InNamespace(namespace))).To(Succeed())
		g.Expect(machines.Items).To(BeEmpty())
	}, 5*time.Minute, time.Second).Should(Succeed(), "every Machine is removed")
	cpuAll, rssAll := h.manager.usage()
	apiAll, apiKindsAll, err := apiserverRequests(ctx, h.env.Config)
	g.Expect(err).NotTo(HaveOccurred())

	sweepListings := simAfter.Requests["GET /cluster/resources"] - simBeforeOff.Requests["GET /cluster/resources"]
	ceiling := model.CloneCeiling(h.opts.nodes, false, 32<<30) * model.ScaleFactor() // clones a wall minute
	achieved := float64(n) / allCloned.Minutes()
	ratio := achieved / ceiling
	createCalls := calls(simBurst) - calls(simBefore)
	allCalls := calls(simAfter) - calls(simBefore) - naiveCalls // HyperFleet's calls only
	jobsErr := h.github.VerifyEachJobRanOnce()

	var tb table
	tb.row("N (jobs queued at once; pool max)", "%d", n)
	tb.row("setup (control plane, CAPI, fakes, manager; HypervisorCluster Available)", "%s", round(setup))
	tb.row("time until every job's VM was cloned (wall)", "%s (%s model)", round(allCloned), round(time.Duration(float64(allCloned)*model.ScaleFactor())))
	tb.row("time until every job runs on its VM (wall)", "%s", round(allRunning))
	tb.row("throughput / the model's clone ceiling", "%.0f / %.0f clones a wall minute: **%.1f%%**", achieved, ceiling, 100*ratio)
	tb.row("webhook received → clone call, p50 / p99 (wall)", "%s / %s", round(pct(cloneLatency, 0.5)), round(pct(cloneLatency, 0.99)))
	tb.row("Proxmox calls per VM: until running / whole life", "%.1f / %.1f", float64(createCalls)/float64(n), float64(allCalls)/float64(n))
	tb.row("manager CPU: burst / whole run (incl. power-off and cleanup)", "%.1f s / %.1f s", (cpuBurst - cpuBefore).Seconds(), (cpuAll - cpuBefore).Seconds())
	tb.row("manager peak RSS: at the burst's end / whole run", "%.0f MiB / %.0f MiB", float64(rssBurst)/(1<<20), float64(rssAll)/(1<<20))
	tb.row("API-server requests per VM (all clients): burst / whole life", "%.1f / %.1f", float64(apiBurst-apiBefore)/float64(n), float64(apiAll-apiBefore)/float64(n))
	tb.row("power-off → every VM destroyed (sweep interval "+h.opts.sweep.String()+")", "%s for %d VMs", round(destroyed), n)
	tb.row("sweep listings (`GET /cluster/resources`) meanwhile", "%d", sweepListings)
	tb.row("the sweep: one listing of every VM (`GET /cluster/resources`)", "1 call, %s", round(naive.listing))
	tb.row("naive: one status read per VM, one round over the N VMs", "%d calls, %s", naive.calls, round(naive.perVM))
	tb.row("naive: the same round with a new Proxmox client (TLS connection) per read", "%d calls, %s", naive.calls, round(naive.perVMNewClient))
	tb.row("bootstrap: attest + runner config, VMs at once (most in flight)", "%d", gs.maxInFlight)
	tb.row("bootstrap: attest + runner config throughput", "%.1f VMs/s (%d VMs over %s)", boot.throughput, boot.n, round(boot.span))
	tb.row("bootstrap: attest → runner config per VM, p50 / p99", "%s / %s", round(pct(boot.latency, 0.5)), round(pct(boot.latency, 0.99)))
	tb.row("GitHub JIT refusals (175 a model minute)", "%d", h.github.JITRefusals())
	tb.row("lock waits / lock timeouts", "%d / %d", simAfter.LockWaits-simBefore.LockWaits, simAfter.LockTimeouts-simBefore.LockTimeouts)
	tb.row("requests queued for a pveproxy worker / longest queue / refused", "%d / %d / %d", simAfter.Queued-simBefore.Queued, simAfter.MaxQueue, simAfter.Refused-simBefore.Refused)
	tb.row("jobs run exactly once / guest errors", "%v / %d", jobsErr == nil, len(gs.errors()))

	report := fmt.Sprintf("# bench-scale\n\nDate: %s. Machine: %s.\n\nLoad model: %s.\n\n"+
		"HyperFleet: manager process (test/scale/scalemanager: cmd/manager's flags and defaults) with "+
		"concurrency 10, sweep interval %s, task poll %s (production's 2s at the time scale), repair interval %s; "+
		"Cluster API v1.12 manager (%s); kube-apiserver and etcd (envtest); bootstrap service (builtin CA); fake GitHub "+
		"(TLS, 175 JIT configs a model minute per installation); %d simulated nodes with a 32 GiB runner template "+
		"each on local-lvm; pool min 0, max N; %s.\n\n| figure | value |\n|---|---|\n%s\nCalls by endpoint (HyperFleet's, whole run; the naive round left out):\n\n%s\n"+
		"API-server requests by verb and resource, whole run, every client (the 15 most made):\n\n%s",
		time.Now().UTC().Format(time.RFC3339), machineLine(), model, h.opts.sweep,
		time.Duration(float64(2*time.Second)/model.ScaleFactor()), h.opts.repair, capiSettings(capiArgs), h.opts.nodes, limits, tb.b.String(),
		endpointTable(diffRequests(diffRequests(simAfter.Requests, simBefore.Requests), diffRequests(simBeforeOff.Requests, simBeforeNaive.Requests))),
		topRequests(diffRequests(apiKindsAll, apiKindsBefore), n, 15))
	path := os.Getenv("HYPERFLEET_BENCH_SCALE_REPORT")
	if path == "" {
		path = "bench-scale.md"
	}
	g.Expect(os.WriteFile(path, []byte(report), 0o644)).To(Succeed())
	t.Log("\n" + report)

	g.Expect(naive.err).NotTo(HaveOccurred())
	g.Expect(jobsErr).NotTo(HaveOccurred(), "every job ran exactly once")
	g.Expect(gs.errors()).To(BeEmpty(), "every guest attested, got its runner config and ran its job")
	g.Expect(ownedVMs(h.sim)).To(BeEmpty(), "no VM is left")
	g.Expect(foreignVMs(h.sim)).To(Equal(foreignBefore), "foreign VMs are untouched")
	g.Expect(simAfter.LockTimeouts-simBefore.LockTimeouts).To(BeNumerically("<=", max(1, n/100)), "no lock-timeout storm")
	g.Expect(ratio).To(BeNumerically(">=", 0.9), "throughput reaches 90%% of the model's ceiling")
}

// running counts the jobs among ids that a runner has taken.
func running(gh *fakegithub.Server, ids map[int64]bool) int {
	k := 0
	for _, j := range gh.Jobs() {
		if ids[j.ID] && j.Status != fakegithub.JobQueued {
			k++
		}
	}
	return k
}

// webhookToClone pairs the i-th queued delivery with the i-th VM's first clone request: runners
// are not bound to jobs (a pool scales on counts), so the latency a job sees is that of the
// clone its arrival caused.
func webhookToClone(deliveries []fakegithub.Delivery, clones *cloneLog) []time.Duration {
	var hooks []time.Time
	for _, d := range deliveries {
		if d.Action == "queued" && d.StatusCode/100 == 2 {
			hooks = append(hooks, d.At)
		}
	}
	first, _ := clones.snapshot()
	var cl []time.Time
	for _, at := range first {
		cl = append(cl, at)
	}
	sort.Slice(hooks, func(i, k int) bool { return hooks[i].Before(hooks[k]) })
	sort.Slice(cl, func(i, k int) bool { return cl[i].Before(cl[k]) })
	var out []time.Duration
	for i := range min(len(hooks), len(cl)) {
		out = append(out, cl[i].Sub(hooks[i]))
	}
	return sortedDurations(out)
}

type bootFigures struct {
	n          int
	span       time.Duration
	throughput float64
	latency    []time.Duration
}

// bootstrapFigures: how fast the bootstrap service attested VMs and handed out runner configs.
func bootstrapFigures(recs []guestRecord) bootFigures {
	var f bootFigures
	var first, last time.Time
	for _, r := range recs {
		if r.Configured.IsZero() {
			continue
		}
		f.n++
		f.latency = append(f.latency, r.Configured.Sub(r.attestStart))
		if first.IsZero() || r.attestStart.Before(first) {
			first = r.attestStart
		}
		if r.Configured.After(last) {
			last = r.Configured
		}
	}
	f.span = last.Sub(first)
	if f.span > 0 {
		f.throughput = float64(f.n) / f.span.Seconds()
	}
	f.latency = sortedDurations(f.latency)
	return f
}

func endpointTable(req map[string]int) string {
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := "| endpoint | calls |\n|---|---|\n"
	for _, k := range keys {
		s += fmt.Sprintf("| `%s` | %d |\n", k, req[k])
	}
	return s
}

// foreignVMs are the VMs HyperFleet does not own, by VMID.
func foreignVMs(sim *pvesim.Simulator) map[int]pvesim.VM {
	out := map[int]pvesim.VM{}
	for _, vm := range sim.VMs() {
		if vm.VMID < firstVMID {
			vm.Config, vm.Pending = nil, nil
			out[vm.VMID] = vm
		}
	}
	return out
}

// capiSettings describes the Cluster API manager's flags for the report.
func capiSettings(args []string) string {
	if len(args) == 0 {
		return "its defaults: a client of 20 requests a second, burst 30; 10 Machines at a time"
	}
	return strings.Join(args, " ") + "; its defaults otherwise"
}
