package controllers_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// callsTimeScale runs the count against the simulator's load model 20 times faster than real
// time; the controllers' task polls are scaled alike (100 ms here is their 2 s default, 10 ms the
// provider's 200 ms), so each task is polled as often as it would be on a real cluster.
const callsTimeScale = 20

// maxCallsPerVM is the bar TestCallsPerVMEndToEnd holds HyperFleet to: Proxmox calls per runner
// VM over its whole life through the controllers, the health checks and sweeps left out (they
// cost the same with one VM or a thousand and are reported on their own).
const maxCallsPerVM = 17.0

// sweepEndpoints are the four cluster-wide calls of one health check and sweep.
var sweepEndpoints = []string{"GET /version", "GET /access/permissions", "GET /nodes", "GET /cluster/resources"}

// TestCallsPerVMEndToEnd counts the Proxmox API calls a runner VM costs through the real
// controllers: Cluster API's, the BootstrapConfig's, the MachineClaim's and the sweep's, against
// the simulator's load model. N runners (HYPERFLEET_CALLS_N, 5 by default, at most 20) each go
// through the whole life: created, started, their agent attests (the guest writes what the
// bootstrap service would), Ready, the spent seed removed, the job ends and the guest powers off,
// the sweep sees it, the Machine goes, the VM is destroyed and the claim released. It prints the
// calls per VM for create, run and delete by endpoint, and the idle cost of the HypervisorCluster,
// and fails above maxCallsPerVM. `make bench` runs it with its report.
func TestCallsPerVMEndToEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := 5
	if v, err := strconv.Atoi(os.Getenv("HYPERFLEET_CALLS_N")); err == nil && v > 0 {
		n = min(v, 20)
	}
	ns := newNamespace(t)
	jobsDone := make(chan struct{})
	model := pvesim.DefaultLoadModel()
	model.TimeScale = callsTimeScale
	// The count is of calls, not of lock waits: enough storage slots that no clone times out
	// waiting for another (the controllers' clone queue is measured elsewhere).
	model.StorageSlots = 20
	startCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{
		Load: model,
		// The guest agent answers 10 s (model) after the start, as a booting guest's does.
		BootDelay: 10 * time.Second / callsTimeScale,
		BootHook:  attestingGuest(ns, 15*time.Second/callsTimeScale, jobsDone),
	})
	startManager(t, testTiming{Sweep: time.Second, OrphanGrace: 2 * time.Second,
		TaskPoll: 2 * time.Second / callsTimeScale, ProviderTaskPoll: 200 * time.Millisecond / callsTimeScale})
	cluster := capiFleet(t, ns, sim)
	hc := &infrav1.HypervisorCluster{}
	hc.Namespace, hc.Name = ns, "pve"
	g.Eventually(func(g Gomega) {
		got := get(g, cluster)
		g.Expect(ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(get(g, hc).Status.LastSweepTime).NotTo(BeNil())
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

	// Idle: health checks and sweeps only.
	time.Sleep(500 * time.Millisecond)
	sim.ResetRequests()
	idleWindow := 3 * time.Second
	time.Sleep(idleWindow)
	idle := sim.Requests()

	// Create: every runner Ready, its agent attested.
	sim.ResetRequests()
	claims := make([]*infrav1.MachineClaim, n)
	for i := range claims {
		claims[i] = capiMachineWithConfig(t, ns, builder.NewBootstrapConfig(fmt.Sprintf("runner-%d", i), ns).Build())
	}
	for _, c := range claims {
		g.Eventually(func(g Gomega) {
			got := get(g, c)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%+v", got.Status.Conditions)
		}, 60*time.Second, 50*time.Millisecond).Should(Succeed())
	}
	created := sim.Requests()

	// Run: the job runs; the spent seed is removed meanwhile.
	sim.ResetRequests()
	for _, c := range claims {
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, c).Status.CloudInitEjectedTime).NotTo(BeNil())
		}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	}
	time.Sleep(time.Second)
	ran := sim.Requests()

	// Delete: the guests power off; the sweep sees it and each VM goes with its Machine and claim.
	sim.ResetRequests()
	close(jobsDone)
	for _, c := range claims {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(c), &infrav1.MachineClaim{}))
		}, 60*time.Second, 50*time.Millisecond).Should(BeTrue(), "claim %s released", c.Name)
	}
	deleted := sim.Requests()
	g.Expect(ownedVMs(sim)).To(BeEmpty())

	create, createSweeps := perVM(created, n)
	run, runSweeps := perVM(ran, n)
	del, delSweeps := perVM(deleted, n)
	total := sum(create) + sum(run) + sum(del)
	idleSweeps := idle["GET /version"]
	idlePerSweep := float64(sum(idle)) / float64(max(idleSweeps, 1))
	t.Logf("Proxmox API calls per runner VM through the controllers, %d VMs, simulator %s", n, model)
	t.Logf("health checks and sweeps left out: %d, %d and %d during create, run and delete (4 calls each)",
		createSweeps, runSweeps, delSweeps)
	t.Logf("\n%s", callsTable(n, create, run, del))
	t.Logf("calls per VM: create %.1f, run %.1f, delete %.1f, whole life %.1f", sum(create), sum(run), sum(del), total)
	t.Logf("idle HypervisorCluster: %d health checks and sweeps in %s, %.1f calls each: %.1f calls a minute at the default 30s interval; %v",
		idleSweeps, idleWindow, idlePerSweep, 2*idlePerSweep, idle)
	g.Expect(total).To(BeNumerically("<=", maxCallsPerVM), "Proxmox calls per VM over its life")
	g.Expect(idlePerSweep).To(BeNumerically("<=", 4), "an idle sweep costs its four cluster-wide calls")
}

// attestingGuest is a runner VM's guest: after boot it redeems its join token and attests, writing
// to its BootstrapConfig what the bootstrap service writes, runs its job until jobsDone closes,
// and powers off.
func attestingGuest(ns string, boot time.Duration, jobsDone <-chan struct{}) pvesim.BootHook {
	return func(ctx context.Context, vm pvesim.BootVM) error {
		select {
		case <-time.After(boot):
		case <-ctx.Done():
			return ctx.Err()
		}
		update := func(mutate func(*bootstrapv1.BootstrapConfig)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				bc := &bootstrapv1.BootstrapConfig{}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm.Name}, bc); err != nil {
					return err
				}
				mutate(bc)
				return env.Client.Status().Update(ctx, bc)
			})
		}
		if err := update(func(bc *bootstrapv1.BootstrapConfig) {
			if bc.Status.JoinToken != nil {
				bc.Status.JoinToken.RedeemedTime = ptr.To(metav1.Now())
			}
		}); err != nil {
			return err
		}
		if err := update(func(bc *bootstrapv1.BootstrapConfig) {
			bc.Status.AttestedTime = ptr.To(metav1.Now())
			conditions.Set(bc, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionTrue,
				Reason: bootstrapv1.AttestedReason, Message: "attested"})
		}); err != nil {
			return err
		}
		select {
		case <-jobsDone:
		case <-ctx.Done():
		}
		return nil
	}
}

// perVM divides a phase's calls among n VMs, without the phase's health checks and sweeps (as many
// as GET /version calls, four cluster-wide calls each).
func perVM(reqs map[string]int, n int) (map[string]float64, int) {
	sweeps := reqs["GET /version"]
	out := map[string]float64{}
	for k, v := range reqs {
		if slices.Contains(sweepEndpoints, k) {
			v -= sweeps
		}
		if v > 0 {
			out[k] = float64(v) / float64(n)
		}
	}
	return out, sweeps
}

func sum[V int | float64](m map[string]V) V {
	var s V
	for _, v := range m {
		s += v
	}
	return s
}

// callsTable is the endpoint table of a count: calls per VM by phase.
func callsTable(n int, create, run, del map[string]float64) string {
	keys := map[string]bool{}
	for _, m := range []map[string]float64{create, run, del} {
		for k := range m {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	var b strings.Builder
	fmt.Fprintf(&b, "| endpoint (calls per VM, %d VMs) | create | run | delete | life |\n|---|---|---|---|---|\n", n)
	for _, k := range sorted {
		fmt.Fprintf(&b, "| `%s` | %.1f | %.1f | %.1f | %.1f |\n", k, create[k], run[k], del[k], create[k]+run[k]+del[k])
	}
	fmt.Fprintf(&b, "| all | %.1f | %.1f | %.1f | %.1f |", sum(create), sum(run), sum(del), sum(create)+sum(run)+sum(del))
	return b.String()
}
