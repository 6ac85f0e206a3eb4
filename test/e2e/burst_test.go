package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

const burstJobs = 20

// TestBurstOfJobs queues 20 jobs at once on a RunnerPool of min 1, max 5: every job runs exactly
// once, the pool never has more than 5 Machines, and afterwards only the floor's Machine, claim
// and VM are left, with every VM HyperFleet does not own untouched.
func TestBurstOfJobs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns, pool := fleet.State.Namespace, fleet.State.Pool
	poolLabels := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool}

	// The floor: one runner, bootstrapped.
	g.Eventually(func(g Gomega) {
		g.Expect(live(g, c, ns, poolLabels)).To(HaveLen(1))
		claims := &infrav1.MachineClaimList{}
		g.Expect(c.List(ctx, claims, client.InNamespace(ns), poolLabels)).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1))
		g.Expect(claims.Items[0].Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "the pool reaches its floor of one bootstrapped runner")
	if first, ok := boots.first(); ok {
		t.Logf("time to first VM: %s (sample fleet applied to the floor runner's agent starting)", first.Sub(fleet.AppliedAt).Round(time.Millisecond))
	}
	foreignBefore := foreign(fleet.Simulator.VMs())

	sampler := startSampler(c, ns, poolLabels)
	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: burstJobs, Labels: []string{"linux", "x64"}, Name: "burst"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(HaveLen(burstJobs))
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}

	g.Eventually(func(g Gomega) {
		done := 0
		for _, j := range fleet.GitHub.Jobs() {
			if ids[j.ID] && j.Status == fakegithub.JobCompleted {
				done++
			}
		}
		g.Expect(done).To(Equal(burstJobs))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed(), "every job completes")
	g.Expect(fleet.GitHub.VerifyEachJobRanOnce()).To(Succeed())
	logJobTimings(t, fleet.GitHub.Jobs(), ids)

	// Back to the floor: one Machine, one claim, one BootstrapConfig, one data Secret, one VM.
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "only the floor's Machine is left")
		claims := &infrav1.MachineClaimList{}
		g.Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1), "only the floor's MachineClaim is left")
		g.Expect(claims.Items[0].Name).To(Equal(machines.Items[0].Spec.InfrastructureRef.Name))
		configs := &bootstrapv1.BootstrapConfigList{}
		g.Expect(c.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		g.Expect(configs.Items).To(HaveLen(1), "only the floor's BootstrapConfig is left")
		g.Expect(dataSecrets(g, c, ns)).To(Equal(1), "only the floor's bootstrap data Secret is left")
		owned, _ := devfleet.SplitVMs(fleet.Simulator.VMs())
		g.Expect(owned).To(HaveLen(1), "only the floor's VM is left")
		g.Expect(owned[0].VMID).To(Equal(vmidOf(claims.Items[0].Status.VMID)))
		p := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, p)).To(Succeed())
		g.Expect(p.Status.DesiredReplicas).To(BeEquivalentTo(1))
		// The fake GitHub speaks HTTPS, verified against the CA the pool's caBundleRef names:
		// nothing for the local fleet to warn about.
		g.Expect(p.Spec.Platform.GitHub.APIURL).To(HavePrefix("https://"))
		g.Expect(p.Spec.Platform.GitHub.AllowInsecureHTTP).To(BeFalse())
		g.Expect(conditions.Get(p, fleetv1.InsecureTransportCondition)).To(PointTo(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", fleetv1.HTTPSReason))))
		g.Expect(conditions.IsTrue(p, fleetv1.PlatformAvailableCondition)).To(BeTrue())
		g.Expect(fleet.GitHub.Runners()).To(HaveLen(1), "only the floor's runner is registered")
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the pool returns to its floor")

	maxLive, maxAll := sampler.stop()
	t.Logf("pool size during the burst: at most %d live Machines (%d counting those being deleted), %d samples", maxLive, maxAll, sampler.samples)
	g.Expect(maxLive).To(BeNumerically("<=", 5), "maxReplicas is never exceeded")
	g.Expect(maxLive).To(BeNumerically(">=", 2), "the pool grew for the burst")
	g.Expect(foreign(fleet.Simulator.VMs())).To(Equal(foreignBefore), "VMs HyperFleet does not own are untouched")

	// The local fleet's job history (one SQLite file the manager and the console share) holds
	// every job's record, sealed once its VM was gone, verifying with the published key.
	store, err := history.Open(ctx, fleet.State.HistoryURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()
	keys, err := custody.PublicKeys(ctx, c, fleet.Installation.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for id := range ids {
			rec, err := store.Job(ctx, fmt.Sprintf("github/%d", id))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rec.Sealed()).To(BeTrue(), "job %d", id)
			g.Expect(rec.Outcome).To(Equal(history.OutcomeSucceeded))
			g.Expect(rec.Times.VMDestroyed).NotTo(BeNil())
			var env provenance.Envelope
			g.Expect(json.Unmarshal(rec.Envelope, &env)).To(Succeed())
			_, err = provenance.Verify(env, keys...)
			g.Expect(err).NotTo(HaveOccurred(), "job %d's record verifies", id)
		}
	}, time.Minute, time.Second).Should(Succeed(), "every job of the burst has a sealed record in the local fleet's history")
}

// live lists the Machines matching labels that are not being deleted.
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

// dataSecrets counts bootstrap data Secrets (those a BootstrapConfig controls).
func dataSecrets(g Gomega, c client.Client, ns string) int {
	list := &corev1.SecretList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, s := range list.Items {
		if slices.ContainsFunc(s.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "BootstrapConfig" }) {
			n++
		}
	}
	return n
}

// foreign returns every VM HyperFleet does not own (templates included), by VMID.
func foreign(vms []pvesim.VM) map[int]pvesim.VM {
	_, others := devfleet.SplitVMs(vms)
	out := map[int]pvesim.VM{}
	for _, vm := range others {
		out[vm.VMID] = vm
	}
	for _, vm := range vms {
		if vm.Template {
			out[vm.VMID] = vm
		}
	}
	return out
}

// sampler lists the pool's Machines continuously, straight from the API server, and keeps the
// largest counts seen.
type sampler struct {
	cancel          context.CancelFunc
	done            sync.WaitGroup
	maxLive, maxAll int
	samples         int
}

func startSampler(c client.Client, ns string, labels client.MatchingLabels) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{cancel: cancel}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for ctx.Err() == nil {
			list := &clusterv1.MachineList{}
			if err := c.List(ctx, list, client.InNamespace(ns), labels); err == nil {
				n := 0
				for _, m := range list.Items {
					if m.DeletionTimestamp.IsZero() {
						n++
					}
				}
				s.maxLive, s.maxAll = max(s.maxLive, n), max(s.maxAll, len(list.Items))
				s.samples++
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) stop() (maxLive, maxAll int) {
	s.cancel()
	s.done.Wait()
	return s.maxLive, s.maxAll
}

// logJobTimings logs how long jobs waited for a runner and how long the burst took to drain.
func logJobTimings(t *testing.T, jobs []fakegithub.Job, ids map[int64]bool) {
	var pickups []time.Duration
	var first, last time.Time
	for _, j := range jobs {
		if !ids[j.ID] {
			continue
		}
		pickups = append(pickups, j.StartedAt.Sub(j.CreatedAt))
		if first.IsZero() || j.CreatedAt.Before(first) {
			first = j.CreatedAt
		}
		if j.CompletedAt.After(last) {
			last = j.CompletedAt
		}
	}
	sort.Slice(pickups, func(i, k int) bool { return pickups[i] < pickups[k] })
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	t.Logf("job pickup latency (queued to started) over %d jobs: min %s, median %s, max %s",
		len(pickups), r(pickups[0]), r(pickups[len(pickups)/2]), r(pickups[len(pickups)-1]))
	t.Logf("time to drain %d jobs (first queued to last completed): %s", len(pickups), r(last.Sub(first)))
}
