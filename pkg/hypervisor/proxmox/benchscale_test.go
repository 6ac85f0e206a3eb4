package proxmox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestBenchScale is `make bench-scale`: a burst of N runner VMs (HYPERFLEET_BENCH_SCALE_N, 1,000
// by default) cloned through the provider against the simulator with its load model on, over
// three nodes that each hold the runner template on local-lvm, then all destroyed. A per-storage
// limit is modelled by two clones or destroys in flight per node (one working, one waiting at
// PVE's lock, well inside its timeout, so the storage never idles between polls); each VM's task
// is polled the way the MachineClaim controller polls it. It writes bench-scale.md
// (HYPERFLEET_BENCH_SCALE_REPORT) with the machine, the date, the model's parameters and:
// time until every VM exists, throughput against the model's clone ceiling, provider latency
// from a VM's turn to its accepted clone (p50/p99), Proxmox calls per VM, lock waits,
// lock timeouts and refused connections, and the time to destroy them all. It fails below 90% of
// the ceiling or on any lock timeout or lost VM. Provider level only: the controllers do not run.
func TestBenchScale(t *testing.T) {
	if os.Getenv("HYPERFLEET_BENCH_SCALE") == "" {
		t.Skip("run by make bench-scale (HYPERFLEET_BENCH_SCALE=1)")
	}
	n := 1000
	if v := os.Getenv("HYPERFLEET_BENCH_SCALE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("HYPERFLEET_BENCH_SCALE_N=%q is not a positive number", v)
		}
	}
	model := pvesim.DefaultLoadModel()
	model.TimeScale = 20
	nodes := []string{"pve1", "pve2", "pve3"}
	inv := &pvesim.Inventory{ClusterName: "bench",
		Storages: []pvesim.StorageSpec{
			{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}, TotalGiB: 1 << 20},
			{Name: "local", Type: "dir", Content: []string{"iso", "snippets"}, TotalGiB: 100},
		}}
	for i, node := range nodes {
		inv.Nodes = append(inv.Nodes, pvesim.NodeSpec{Name: node, CPUs: 64, MemoryMiB: 1 << 20})
		inv.VMs = append(inv.VMs, pvesim.RunnerTemplate(9000+i, node, "runner-"+node, "32G", "runner", "template"))
	}
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: inv, Load: model, Seed: 1})
	p := newTestProvider(t, sim, clusterA, func(c *Config) {
		c.Timeout = time.Minute
		c.TaskPollInterval = model.Wall(time.Second)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	poll := model.Wall(time.Second) // the controller's task poll interval, scaled

	waitTask := func(node string, id hypervisor.TaskID) error {
		for {
			time.Sleep(poll)
			st, err := p.TaskStatus(ctx, node, id)
			if err != nil {
				return err
			}
			if st.Done {
				return st.Err
			}
		}
	}
	type result struct {
		turn, accepted time.Duration
		err            error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	const perNode = 2
	workers := len(nodes) * perNode
	for w := range workers {
		node := nodes[w%len(nodes)]
		tmplID := 9000 + w%len(nodes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				turn := time.Now()
				ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{
					Source: hypervisor.VMRef{Node: node, ID: strconv.Itoa(tmplID)},
					Target: hypervisor.VMRef{Node: node, ID: strconv.Itoa(10000 + i)},
					Name:   fmt.Sprintf("bench-%d", i), Owner: ownerFor(clusterA, fmt.Sprintf("bench-%d", i)),
				})
				results[i].turn, results[i].accepted = turn.Sub(start), time.Since(turn)
				if err == nil {
					err = waitTask(ref.Node, task)
				}
				results[i].err = err
			}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	failed := 0
	lat := make([]time.Duration, 0, n)
	for i, r := range results {
		if r.err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("VM %d: %v", 10000+i, r.err)
			}
		}
		lat = append(lat, r.accepted)
	}
	slices.Sort(lat)
	createStats := sim.LoadStats()

	// Destroy them all, as many in flight per node as clones were.
	start = time.Now()
	for w := range workers {
		node := nodes[w%len(nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				ref := hypervisor.VMRef{Node: node, ID: strconv.Itoa(10000 + i)}
				task, err := p.Delete(ctx, ref)
				if err == nil {
					err = waitTask(node, task)
				}
				if err != nil {
					t.Errorf("destroy %s: %v", ref.ID, err)
				}
			}
		}()
	}
	wg.Wait()
	destroyed := time.Since(start)
	final := sim.LoadStats()
	left := 0
	for _, vm := range sim.VMs() {
		if vm.VMID >= 10000 {
			left++
		}
	}

	ceiling := model.CloneCeiling(len(nodes), false, 32<<30) * model.ScaleFactor() // clones a wall minute
	achieved := float64(n-failed) / created.Minutes()
	ratio := achieved / ceiling
	calls := func(st pvesim.LoadStats) int {
		sum := 0
		for _, v := range st.Requests {
			sum += v
		}
		return sum
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# bench-scale\n\nDate: %s. Machine: %d CPU cores (%s/%s, %s), shared with other work. Go %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version())
	fmt.Fprintf(&b, "Load model: %s.\n\n", model)
	fmt.Fprintf(&b, "Scope: the Proxmox provider driven directly (N clones, each task polled as the MachineClaim controller polls it, two clones or destroys per node's local-lvm in flight), three simulated nodes each with a 32 GiB runner template; the controllers and the API server are not in this run.\n\n")
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| N (VMs in the burst) | %d |\n", n)
	fmt.Fprintf(&b, "| time until every VM exists (wall; model time ×%g) | %s (%s model) |\n", model.TimeScale, created.Round(time.Millisecond), (created * time.Duration(model.TimeScale)).Round(time.Second))
	fmt.Fprintf(&b, "| throughput | %.0f clones a wall minute |\n", achieved)
	fmt.Fprintf(&b, "| model ceiling (3 lock domains × 1 slot / %v linked clone) | %.0f clones a wall minute |\n", model.LinkedCloneTime, ceiling)
	fmt.Fprintf(&b, "| throughput / ceiling | %.1f%% |\n", 100*ratio)
	fmt.Fprintf(&b, "| provider latency, turn → clone accepted, p50 / p99 (wall) | %s / %s |\n", pct(lat, 0.50), pct(lat, 0.99))
	fmt.Fprintf(&b, "| Proxmox calls per VM, create (clone + task polls) | %.2f |\n", float64(calls(createStats))/float64(n))
	fmt.Fprintf(&b, "| Proxmox calls per VM, create + destroy | %.2f |\n", float64(calls(final))/float64(n))
	fmt.Fprintf(&b, "| destroy all N (wall) | %s |\n", destroyed.Round(time.Millisecond))
	fmt.Fprintf(&b, "| failed clones / VMs left after destroy | %d / %d |\n", failed, left)
	fmt.Fprintf(&b, "| lock waits / lock timeouts | %d / %d |\n", final.LockWaits, final.LockTimeouts)
	fmt.Fprintf(&b, "| requests queued for a pveproxy worker / longest queue / refused | %d / %d / %d |\n\n", final.Queued, final.MaxQueue, final.Refused)
	keys := make([]string, 0, len(final.Requests))
	for k := range final.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "Calls by endpoint:\n\n| endpoint | calls |\n|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| `%s` | %d |\n", k, final.Requests[k])
	}
	report := os.Getenv("HYPERFLEET_BENCH_SCALE_REPORT")
	if report == "" {
		report = "bench-scale.md"
	}
	if err := os.WriteFile(report, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())

	if failed > 0 || left > 0 {
		t.Errorf("%d clones failed, %d VMs left", failed, left)
	}
	if final.LockTimeouts > 0 {
		t.Errorf("%d lock timeouts: the burst caused a lock-timeout storm", final.LockTimeouts)
	}
	if ratio < 0.9 {
		t.Errorf("throughput %.0f/min is %.1f%% of the model's ceiling %.0f/min, below 90%%", achieved, 100*ratio, ceiling)
	}
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Round(time.Microsecond)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu unknown"
}
