package scale

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// apiserverRequests sums apiserver_request_total from the API server's /metrics: every request
// it answered, from every client (HyperFleet's manager and bootstrap service, Cluster API's
// manager and this harness), in all and by verb and resource ("PATCH machines/status").
func apiserverRequests(ctx context.Context, cfg *rest.Config) (int, map[string]int, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	total, by := 0.0, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		total += v
		by[requestKind(line)] += v
	}
	out := make(map[string]int, len(by))
	for k, v := range by {
		out[k] = int(v)
	}
	return int(total), out, sc.Err()
}

// requestKind names a series of apiserver_request_total by its verb and resource, e.g.
// "PATCH machines/status" or "WATCH secrets".
func requestKind(line string) string {
	labels := map[string]string{}
	body := line[strings.IndexByte(line, '{')+1 : strings.LastIndexByte(line, '}')]
	for _, kv := range strings.Split(body, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	kind := labels["verb"] + " " + labels["resource"]
	if labels["resource"] == "" {
		kind = labels["verb"] + " (non-resource)"
	}
	if sub := labels["subresource"]; sub != "" {
		kind += "/" + sub
	}
	return kind
}

// topRequests is a table of the n kinds of API-server request made most, per VM.
func topRequests(by map[string]int, vms, n int) string {
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if by[a] != by[b] {
			return by[b] - by[a]
		}
		return strings.Compare(a, b)
	})
	s := "| request | all | per VM |\n|---|---|---|\n"
	for _, k := range keys[:min(n, len(keys))] {
		s += fmt.Sprintf("| `%s` | %d | %.1f |\n", k, by[k], float64(by[k])/float64(vms))
	}
	return s
}

// hypervisorClusterAvailable waits until the run's HypervisorCluster is Available.
func (h *harness) hypervisorClusterAvailable(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		hc := &infrav1.HypervisorCluster{}
		err := h.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "pve"}, hc)
		if err == nil && conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("HypervisorCluster not Available after %s (%v); see %s", timeout, err, h.manager.logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ownedVMs lists the simulator's VMs in HyperFleet's VMID range.
func ownedVMs(sim *pvesim.Simulator) []pvesim.VM {
	var out []pvesim.VM
	for _, vm := range sim.VMs() {
		if vm.VMID >= firstVMID && !vm.Template {
			out = append(out, vm)
		}
	}
	return out
}

// claimOf reads the claim ("namespace/name") from the ownership block HyperFleet writes into a
// VM's description; "" when it has none.
func claimOf(vm pvesim.VM) string {
	for _, line := range strings.Split(vm.Description, "\n") {
		if v, ok := strings.CutPrefix(line, "claim: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func sortedDurations(d []time.Duration) []time.Duration {
	out := slices.Clone(d)
	slices.Sort(out)
	return out
}

func calls(st pvesim.LoadStats) int {
	n := 0
	for _, v := range st.Requests {
		n += v
	}
	return n
}

func diffRequests(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func machineLine() string {
	return fmt.Sprintf("%d CPU cores (%s/%s, %s), shared with other work; Go %s",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version())
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

// table is a two-column markdown table.
type table struct{ b bytes.Buffer }

func (t *table) row(name, format string, args ...any) {
	fmt.Fprintf(&t.b, "| %s | %s |\n", name, fmt.Sprintf(format, args...))
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(100 * time.Microsecond)
	}
}
