package scale

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

var (
	proxmoxJobLabels = []string{"linux", "x64", "pve"}
	hypervJobLabels  = []string{"linux", "x64", "hyperv"}
)

// TestSoak is `make soak` (HYPERFLEET_SOAK_N jobs, 2,000 for the full run; 24 by default, which
// `make test` runs in about two minutes; HYPERFLEET_SOAK_MAX runners per pool, 6 by default): VM lifecycles through HyperFleet's manager process,
// Cluster API, the bootstrap service and the fake GitHub, on two pools, one on the Proxmox
// simulator (load model on, time scale 10) and one on the Hyper-V simulator, each job a VM that
// attests, runs the job and powers off. Meanwhile about 5% of Proxmox requests fail (500, 596,
// hung calls, clone tasks failing, destroys failing on a lock timeout, clones whose answer is
// lost after the clone started) and Hyper-V calls fail at about the same rate (Busy, crashed
// module runs, 503s, hung requests); the manager is restarted three times (twice killed, once
// stopped) and the bootstrap service once; one job in 20 gets no webhook (the repair loop must
// find it) and one in 20 gets its webhook twice. It asserts every job ran exactly once on one
// runner, no VM is left, no claim ever had two VMs at once, and foreign VMs on both hypervisors
// are untouched, and reports the time to settle.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, Cluster API and HyperFleet's manager")
	}
	g := NewWithT(t)
	n := envInt(t, "HYPERFLEET_SOAK_N", 24)
	model := pvesim.DefaultLoadModel()
	model.TimeScale = 10
	timeout := time.Duration(envInt(t, "HYPERFLEET_SOAK_TIMEOUT_MINUTES", 10)) * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir := t.TempDir()
	if keep := os.Getenv("HYPERFLEET_SCALE_LOGS"); keep != "" {
		dir = keep
		g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	}
	gs := newGuests(false, 500*time.Millisecond, 20*time.Second)
	gs.jobTime = 300 * time.Millisecond
	maxRunners := envInt(t, "HYPERFLEET_SOAK_MAX", 6)
	h, err := start(ctx, options{dir: dir, minRunners: 0, maxRunners: int32(maxRunners), model: model, guests: gs, foreign: 4,
		labels: proxmoxJobLabels, hyperv: true, hypervLabels: hypervJobLabels,
		sweep: 2 * time.Second, repair: 10 * time.Second, orphanGrace: 20 * time.Second, providerTimeout: 5 * time.Second,
		// The soak runs about 3,000 jobs an hour, as a large organization does; GitHub gives such an
		// organization's App installation 15,000 REST requests an hour (Enterprise Cloud), where the
		// fake's default, 5,000, is a small organization's.
		githubHourlyBudget: 15000})
	g.Expect(err).NotTo(HaveOccurred())
	defer h.stop()
	for _, name := range []string{"pve", "hv"} {
		g.Eventually(func(g Gomega) {
			hc := &infrav1.HypervisorCluster{}
			g.Expect(h.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, hc)).To(Succeed())
			g.Expect(conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
		}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "HypervisorCluster %s is Available", name)
	}
	pveForeign, hvForeign := foreignVMs(h.sim), foreignHyperV(h.hv)

	// Faults, about 5% of what HyperFleet sends each hypervisor.
	for _, f := range []pvesim.Fault{
		{Rate: 0.015, Status: 500, Message: "Internal Server Error"},
		{Rate: 0.015, Status: 596, Message: "Connection timed out"},
		{Rate: 0.005, Hang: true},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Rate: 0.05, TaskExitStatus: "clone failed: storage full"},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Rate: 0.05, LoseResponse: true},
		{Endpoint: "DELETE /nodes/{node}/qemu/{vmid}", Rate: 0.05, TaskExitStatus: "can't lock file '/var/lock/qemu-server/lock-0.conf' - got timeout"},
	} {
		h.sim.InjectFault(f)
	}
	watch := startWatch(h)
	faultsCtx, stopFaults := context.WithCancel(ctx)
	hvFaults := injectHyperVFaults(faultsCtx, h.hv, 0.05)

	// The jobs, all queued at once: 5% of webhooks dropped, 5% delivered twice.
	begin := time.Now()
	var dropped, duplicated int
	ids := map[int64]bool{}
	for i := range n {
		labels := proxmoxJobLabels
		if i%2 == 1 {
			labels = hypervJobLabels
		}
		var opts []fakegithub.JobOption
		if i%20 == 3 {
			opts = append(opts, fakegithub.WithoutQueuedWebhook())
			dropped++
		}
		j := h.github.CreateJob(repo, labels, opts...)
		ids[j.ID] = true
		if i%20 == 10 {
			g.Expect(h.github.DeliverJobWebhook(j.ID)).To(Succeed())
			duplicated++
		}
	}

	// Restarts as the jobs complete: the manager at 25% (killed), 50% (stopped) and 75%
	// (killed), the bootstrap service at 40%.
	type restart struct {
		at   float64
		what string
		do   func()
	}
	restarts := []restart{
		{0.25, "manager killed", func() { h.manager.stop(true); g.Expect(h.manager.start()).To(Succeed()) }},
		{0.40, "bootstrap service restarted", func() { h.bootstrap.stop(); g.Expect(h.bootstrap.start(ctx)).To(Succeed()) }},
		{0.50, "manager stopped", func() { h.manager.stop(false); g.Expect(h.manager.start()).To(Succeed()) }},
		{0.75, "manager killed", func() { h.manager.stop(true); g.Expect(h.manager.start()).To(Succeed()) }},
	}
	var done []string
	allRan := time.Duration(0)
	lastLog := time.Now()
	for allRan == 0 {
		if ctx.Err() != nil {
			diagnose(t, h, ids)
			t.Fatalf("only %d of %d jobs completed in %s (%s); logs in %s", completed(h.github, ids), n, timeout, strings.Join(done, ", "), dir)
		}
		time.Sleep(250 * time.Millisecond)
		c := completed(h.github, ids)
		if time.Since(lastLog) > 15*time.Second {
			t.Logf("%s: %d of %d jobs completed; %d Proxmox and %d Hyper-V VMs", round(time.Since(begin)), c, n, len(ownedVMs(h.sim)), len(ownedHyperV(h.hv)))
			lastLog = time.Now()
		}
		for len(restarts) > 0 && float64(c) >= restarts[0].at*float64(n) {
			restarts[0].do()
			done = append(done, fmt.Sprintf("%s after %d jobs", restarts[0].what, c))
			restarts = restarts[1:]
		}
		if c == n {
			allRan = time.Since(begin)
		}
	}
	stopFaults()
	h.sim.ClearFaults()
	for _, srv := range h.hv.Servers {
		srv.ClearFaults()
	}

	// Settle: no VM, Machine or claim left (the pools' floor is 0).
	var settled time.Duration
	for settled == 0 {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
		machines := &clusterv1.MachineList{}
		claims := &infrav1.MachineClaimList{}
		if h.env.Client.List(ctx, machines, client.InNamespace(namespace)) != nil ||
			h.env.Client.List(ctx, claims, client.InNamespace(namespace)) != nil {
			continue
		}
		if len(machines.Items) == 0 && len(claims.Items) == 0 && len(ownedVMs(h.sim)) == 0 && len(ownedHyperV(h.hv)) == 0 {
			settled = time.Since(begin) - allRan
		}
	}
	dups, replaced, seen := watch.stop()
	cpu, rss := h.manager.usage()
	st := h.sim.LoadStats()
	hvCalls, hvRuns := 0, 0
	for _, c := range h.hv.Calls() {
		hvRuns += c
	}
	for _, srv := range h.hv.Servers {
		for _, c := range srv.Stats().Calls {
			hvCalls += c
		}
	}
	jobsErr := h.github.VerifyEachJobRanOnce()
	leakedPVE, leakedHV := len(ownedVMs(h.sim)), len(ownedHyperV(h.hv))

	var tb table
	tb.row("jobs (VM lifecycles), Proxmox / Hyper-V; pools' max", "%d / %d; %d each", (n+1)/2, n/2, maxRunners)
	failedDeliveries := 0
	for _, d := range h.github.Deliveries() {
		if d.StatusCode/100 != 2 {
			failedDeliveries++
		}
	}
	tb.row("webhooks dropped / delivered twice / not received (the manager restarting)", "%d / %d / %d", dropped, duplicated, failedDeliveries)
	tb.row("restarts", "%s", strings.Join(done, "; "))
	tb.row("Proxmox faults injected", "1.5%% 500, 1.5%% 596, 0.5%% hung; 5%% of clones failing, 5%% of clones' answers lost, 5%% of destroys failing on a lock timeout (%d requests in all)", calls(st))
	tb.row("Hyper-V faults injected", "%d (Busy, crashed runs, 503s, hung requests) over %d PowerShell runs (%d WS-Man requests)", hvFaults.count(), hvRuns, hvCalls)
	tb.row("every job ran (first queued → last completed)", "%s", round(allRan))
	tb.row("settled after the last job (no VM, Machine or claim left)", "%s", round(settled))
	tb.row("jobs lost or run twice", "%v", jobsErr)
	tb.row("VMs left, Proxmox / Hyper-V", "%d / %d", leakedPVE, leakedHV)
	tb.row("claims with two VMs at once / claims whose VM was replaced / claims seen", "%d / %d / %d", len(dups), replaced, seen)
	tb.row("foreign VMs touched, Proxmox / Hyper-V", "%d / %d", touched(pveForeign, foreignVMs(h.sim)), touchedHV(hvForeign, foreignHyperV(h.hv)))
	tb.row("lock waits / lock timeouts (the model's, beside the injected)", "%d / %d", st.LockWaits, st.LockTimeouts)
	tb.row("manager CPU / peak RSS (all four processes)", "%.1f s / %.0f MiB", cpu.Seconds(), float64(rss)/(1<<20))
	report := fmt.Sprintf("# soak\n\nDate: %s. Machine: %s.\n\nLoad model (Proxmox): %s.\n\n| figure | value |\n|---|---|\n%s",
		time.Now().UTC().Format(time.RFC3339), machineLine(), model, tb.b.String())
	if path := os.Getenv("HYPERFLEET_SOAK_REPORT"); path != "" {
		g.Expect(os.WriteFile(path, []byte(report), 0o644)).To(Succeed())
	}
	t.Log("\n" + report)

	g.Expect(settled).NotTo(BeZero(), "the fleet settles; logs in %s", dir)
	g.Expect(jobsErr).NotTo(HaveOccurred(), "no job lost or run twice")
	g.Expect(leakedPVE+leakedHV).To(BeZero(), "no VM leaked")
	g.Expect(dups).To(BeEmpty(), "no claim has two VMs at once")
	g.Expect(foreignVMs(h.sim)).To(Equal(pveForeign), "foreign Proxmox VMs are untouched")
	g.Expect(foreignHyperV(h.hv)).To(Equal(hvForeign), "foreign Hyper-V VMs are untouched")
}

// diagnose logs what a stalled soak left behind, so a failure in CI says why without its logs:
// the jobs not completed, the VMs left, each claim's phase and Ready condition, the Hyper-V
// host's open shells and faults, and the guests' errors.
func diagnose(t *testing.T, h *harness, ids map[int64]bool) {
	t.Helper()
	for _, j := range h.github.Jobs() {
		if ids[j.ID] && j.Status != fakegithub.JobCompleted {
			t.Logf("job %d %v: %s, runner %q, acquired %d times", j.ID, j.Labels, j.Status, j.RunnerName, j.Acquisitions)
		}
	}
	for _, vm := range ownedVMs(h.sim) {
		t.Logf("Proxmox VM %d %s on %s: %s", vm.VMID, vm.Name, vm.Node, vm.Status)
	}
	for _, vm := range ownedHyperV(h.hv) {
		t.Logf("Hyper-V VM %s %s: state %d", vm.ID, vm.Name, vm.State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claims := &infrav1.MachineClaimList{}
	if err := h.env.Client.List(ctx, claims, client.InNamespace(namespace)); err == nil {
		for _, c := range claims.Items {
			ready := conditions.Get(&c, infrav1.ReadyCondition)
			line := fmt.Sprintf("claim %s: phase %s, VM %q on %q", c.Name, c.Status.Phase, c.Status.VMID, c.Status.Node)
			if ready != nil {
				line += fmt.Sprintf(", Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
			}
			t.Log(line)
		}
	}
	for name, srv := range h.hv.Servers {
		st := srv.Stats()
		t.Logf("Hyper-V host %s: %d shells open, WS-Man faults by code %v, requests %v", name, st.OpenShells, st.Faults, st.Calls)
	}
	for _, err := range h.opts.guests.errors() {
		t.Logf("guest: %v", err)
	}
}

func completed(gh *fakegithub.Server, ids map[int64]bool) int {
	k := 0
	for _, j := range gh.Jobs() {
		if ids[j.ID] && j.Status == fakegithub.JobCompleted {
			k++
		}
	}
	return k
}

// ownedHyperV lists the Hyper-V VMs that carry HyperFleet's ownership block.
func ownedHyperV(hv *hvsim.HyperVHosts) []hvsim.HyperVVM {
	var out []hvsim.HyperVVM
	for _, host := range hv.Names {
		for _, vm := range hv.VMs(host) {
			if strings.Contains(vm.Notes, "managed-by: hyperfleet") {
				out = append(out, vm)
			}
		}
	}
	return out
}

// foreignHyperV are the Hyper-V VMs HyperFleet does not own, by ID.
func foreignHyperV(hv *hvsim.HyperVHosts) map[string]hvsim.HyperVVM {
	out := map[string]hvsim.HyperVVM{}
	for _, host := range hv.Names {
		for _, vm := range hv.VMs(host) {
			if !strings.Contains(vm.Notes, "managed-by: hyperfleet") {
				out[vm.ID] = vm
			}
		}
	}
	return out
}

func touched(before, after map[int]pvesim.VM) int {
	k := 0
	for id, vm := range before {
		if a, ok := after[id]; !ok || a.Status != vm.Status || a.Description != vm.Description || a.Name != vm.Name {
			k++
		}
	}
	return k
}

func touchedHV(before, after map[string]hvsim.HyperVVM) int {
	k := 0
	for id, vm := range before {
		if a, ok := after[id]; !ok || a.State != vm.State || a.Notes != vm.Notes || a.Name != vm.Name {
			k++
		}
	}
	return k
}

// watch samples both hypervisors' VMs and records any claim with two VMs at once, and claims
// whose VM changed identity over their life.
type watch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dups   map[string]bool
	vms    map[string]map[string]bool
}

func startWatch(h *harness) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{cancel: cancel, dups: map[string]bool{}, vms: map[string]map[string]bool{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			now := map[string]int{}
			note := func(claim, vm string) {
				if claim == "" {
					return
				}
				now[claim]++
				if w.vms[claim] == nil {
					w.vms[claim] = map[string]bool{}
				}
				w.vms[claim][vm] = true
			}
			for _, vm := range ownedVMs(h.sim) {
				note(claimOf(vm), fmt.Sprintf("pve/%d", vm.VMID))
			}
			for _, vm := range ownedHyperV(h.hv) {
				note(claimOf(pvesim.VM{Description: vm.Notes}), "hv/"+vm.ID)
			}
			for c, k := range now {
				if k > 1 {
					w.dups[c] = true
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the claims that had two VMs at once, how many claims had
// more than one VM over their life (one after another), and how many claims were seen.
func (w *watch) stop() (dups []string, replaced, seen int) {
	w.cancel()
	w.wg.Wait()
	for c := range w.dups {
		dups = append(dups, c)
	}
	sort.Strings(dups)
	for _, vms := range w.vms {
		if len(vms) > 1 {
			replaced++
		}
	}
	return dups, replaced, len(w.vms)
}

// hvFaultCounter counts the Hyper-V faults injected.
type hvFaultCounter struct {
	mu sync.Mutex
	n  int
}

func (c *hvFaultCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// injectHyperVFaults makes about rate of the Hyper-V host's PowerShell runs (each one operation
// of several WS-Man requests, as a Proxmox request is one) fail until ctx ends: one in 1/rate
// VM creations answered Busy by the module, one in 1/rate deletions whose module run crashes,
// and, after every 1/rate runs of any kind, a request answered 503 or held past the provider's
// timeout (alternately). The simulator takes faults one at a time, not by rate, so each is armed
// when its function's count (or the run count) reaches the next multiple, and a module fault is
// armed only once the last one of its function was used up: a function called rarely (a clone
// retried after a backoff) fails at the rate, not at every call.
func injectHyperVFaults(ctx context.Context, hv *hvsim.HyperVHosts, rate float64) *hvFaultCounter {
	c := &hvFaultCounter{}
	srv := hv.Servers[hypervHost]
	every := int(1 / rate)
	type moduleFault struct {
		function string
		arm      func()
		next     int // the function's call count that arms the next fault
		armedAt  int // its call count when the last fault was armed; -1 when none is waiting
	}
	modules := []*moduleFault{
		{function: "New-HFVM", arm: func() { hv.FailNext(hypervHost, "New-HFVM", "Busy", "The host is busy; try again later.") }},
		{function: "Remove-HFVM", arm: func() { hv.CrashNext(hypervHost, "Remove-HFVM", "The term 'Remove-VM' is not recognized.") }},
	}
	for _, m := range modules {
		m.next, m.armedAt = every, -1
	}
	requests := []func(){
		func() { srv.Inject(hvsim.Fault{HTTPStatus: 503, Times: 1}) },
		func() { srv.Inject(hvsim.Fault{Delay: 30 * time.Second, Times: 1}) },
	}
	count := func() {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	go func() {
		next, kind := every, 0
		for ctx.Err() == nil {
			calls := hv.Calls()
			total := 0
			for _, v := range calls {
				total += v
			}
			for _, m := range modules {
				k := calls[hypervHost+"/"+m.function]
				if m.armedAt >= 0 && k > m.armedAt {
					m.armedAt = -1 // used up
				}
				if m.armedAt < 0 && k >= m.next {
					m.arm()
					m.armedAt, m.next = k, k+every
					count()
				}
			}
			if total >= next {
				requests[kind%len(requests)]()
				kind++
				next = total + every
				count()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return c
}
