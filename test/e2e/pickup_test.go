package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

const (
	pickupJobs = 3
	// pickupObjective is the generous bound every path's p99 must stay under on a 2-core machine.
	pickupObjective = 60 * time.Second
)

// TestPickupLatencyByPath runs jobs through each way a runner can be ready for them, on a pool of
// its own (max 3, label "pickup") beside the sample pool: cold (no idle runner, no warm VM: each
// job's VM is cloned), warm (three warm VMs, started by the jobs, no clone) and hot (three idle
// runners booted and registered), with the simulator's default load model on so that clones and
// tasks take time. It logs the pickup latency (queued to started, on the fake GitHub's clock) per
// path with p50, p95 and p99, asserts each p99 under a generous objective,
// that warm pickups cloned nothing, and that the manager's hyperfleet_job_pickup_seconds put each
// phase's jobs on its path.
func TestPickupLatencyByPath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns := fleet.State.Namespace
	sample := &fleetv1.RunnerPool{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.State.Pool}, sample)).To(Succeed())
	labels := append(slices.Clone(fleet.PoolOptions().Labels), "pickup")
	pool := &fleetv1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "pickup", Namespace: ns}, Spec: *sample.Spec.DeepCopy()}
	pool.Spec.MinReplicas, pool.Spec.MaxReplicas, pool.Spec.IdleReplicas, pool.Spec.WarmReplicas = 0, pickupJobs, 0, 0
	pool.Spec.Replicas = nil
	pool.Spec.Platform.GitHub.Labels = labels
	g.Expect(c.Create(ctx, pool)).To(Succeed())
	t.Cleanup(func() { removePool(t, pool) })
	// Clones and tasks take time as on Proxmox (the default load model, at twice real speed), so
	// the paths differ by what they pay; the sample fleet runs without it before and after.
	model := pvesim.DefaultLoadModel()
	model.TimeScale = 2
	fleet.Simulator.SetLoadModel(model)
	t.Cleanup(func() { fleet.Simulator.SetLoadModel(pvesim.LoadModel{}) })
	t.Logf("simulator: %s", model)
	inPool := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool.Name}

	byPath := map[string][]time.Duration{}
	ledger := map[string]string{} // the manager's own count and mean per path
	runPhase := func(path string) []fakegithub.Job {
		before := pickupCounts()
		created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: pickupJobs, Labels: labels, Name: path})
		g.Expect(err).NotTo(HaveOccurred())
		ids := map[int64]bool{}
		for _, j := range created {
			ids[j.ID] = true
		}
		var jobs []fakegithub.Job
		// Each started job's runner claim, read as soon as the job is seen started (the one-job
		// runner goes soon after its job).
		claims := map[int64]*infrav1.MachineClaim{}
		g.Eventually(func(g Gomega) {
			jobs = jobs[:0]
			for _, j := range fleet.GitHub.Jobs() {
				if !ids[j.ID] || j.StartedAt.IsZero() {
					continue
				}
				jobs = append(jobs, j)
				if _, seen := claims[j.ID]; !seen {
					claim := &infrav1.MachineClaim{}
					g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: j.RunnerName}, claim)).To(Succeed())
					claims[j.ID] = claim
				}
			}
			g.Expect(jobs).To(HaveLen(pickupJobs))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed(), "every %s job starts", path)
		if path == metrics.PickupWarm {
			// No clone for a warm pickup: each job's VM was cloned before the job existed (the
			// simulator's clone count is not the measure here: the sample pool and the warm tier's
			// refill after a finished job clone meanwhile).
			for _, j := range jobs {
				claim := claims[j.ID]
				g.Expect(claim.Annotations).To(HaveKeyWithValue(infrav1.WarmAnnotation, infrav1.WarmStarted), "job %d ran on a started warm VM", j.ID)
				g.Expect(claim.CreationTimestamp.Time).To(BeTemporally("<", j.CreatedAt), "cloned before the job existed")
			}
		}
		for _, j := range jobs {
			byPath[path] = append(byPath[path], j.StartedAt.Sub(j.CreatedAt))
		}
		g.Eventually(func(g Gomega) {
			done := 0
			for _, j := range fleet.GitHub.Jobs() {
				if ids[j.ID] && j.Status == fakegithub.JobCompleted {
					done++
				}
			}
			g.Expect(done).To(Equal(pickupJobs))
		}, time.Minute, 200*time.Millisecond).Should(Succeed(), "every %s job completes", path)
		// The manager saw the phase's jobs on this path and on no other (a job whose queued
		// delivery came after its in_progress one has no queue time and is not counted).
		after := pickupCounts()
		for _, p := range []string{metrics.PickupHot, metrics.PickupWarm, metrics.PickupCold} {
			n := after[p].count - before[p].count
			if p == path {
				g.Expect(n).To(BeNumerically(">=", 1), "hyperfleet_job_pickup_seconds counts %s pickups", p)
				ledger[p] = fmt.Sprintf("%d, mean %s", n, time.Duration((after[p].sum-before[p].sum)/float64(n)*float64(time.Second)).Round(10*time.Millisecond))
			} else {
				g.Expect(n).To(BeZero(), "no %s pickup during the %s phase", p, path)
			}
		}
		return jobs
	}

	// Cold: nothing waits; each job's runner is cloned for it.
	runPhase(metrics.PickupCold)

	// Warm: three warm VMs, cloned, configured and stopped.
	setPool(t, pool, func(p *fleetv1.RunnerPoolSpec) { p.WarmReplicas = pickupJobs })
	g.Eventually(func(g Gomega) {
		p := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pool), p)).To(Succeed())
		g.Expect(p.Status.WarmReplicas).To(BeEquivalentTo(pickupJobs))
		g.Expect(live(g, c, ns, inPool)).To(HaveLen(pickupJobs), "the cold runners are gone")
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the warm tier fills")
	runPhase(metrics.PickupWarm)

	// Hot: three idle runners, booted and registered (warm VMs left over are started for them).
	setPool(t, pool, func(p *fleetv1.RunnerPoolSpec) { p.WarmReplicas, p.IdleReplicas = 0, pickupJobs })
	g.Eventually(func(g Gomega) {
		p := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pool), p)).To(Succeed())
		g.Expect(p.Status.IdleReplicas).To(BeEquivalentTo(pickupJobs))
		g.Expect(p.Status.WarmReplicas).To(BeZero())
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed(), "three idle runners wait")
	runPhase(metrics.PickupHot)

	var report strings.Builder
	fmt.Fprintf(&report, "job pickup latency by path (queued to started, %d jobs each, fake GitHub's clock):\n", pickupJobs)
	fmt.Fprintf(&report, "%-5s %8s %8s %8s %8s   %s\n", "path", "p50", "p95", "p99", "max", "hyperfleet_job_pickup_seconds (ledger)")
	for _, path := range []string{metrics.PickupHot, metrics.PickupWarm, metrics.PickupCold} {
		d := byPath[path]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		r := func(x time.Duration) string { return x.Round(10 * time.Millisecond).String() }
		fmt.Fprintf(&report, "%-5s %8s %8s %8s %8s   %s\n", path, r(percentile(d, 50)), r(percentile(d, 95)), r(percentile(d, 99)), r(d[len(d)-1]), ledger[path])
		g.Expect(percentile(d, 99)).To(BeNumerically("<", pickupObjective), "%s pickups' p99", path)
	}
	t.Log(report.String())
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// pickupSamples is the manager's hyperfleet_job_pickup_seconds on one path.
type pickupSamples struct {
	count uint64
	sum   float64
}

// pickupCounts reads the manager's hyperfleet_job_pickup_seconds by path.
func pickupCounts() map[string]pickupSamples {
	out := map[string]pickupSamples{}
	for _, path := range []string{metrics.PickupHot, metrics.PickupWarm, metrics.PickupCold} {
		m := &dto.Metric{}
		if err := metrics.JobPickupSeconds.WithLabelValues("github", path).(prometheus.Histogram).Write(m); err == nil {
			out[path] = pickupSamples{count: m.GetHistogram().GetSampleCount(), sum: m.GetHistogram().GetSampleSum()}
		}
	}
	return out
}

func setPool(t *testing.T, pool *fleetv1.RunnerPool, change func(*fleetv1.RunnerPoolSpec)) {
	t.Helper()
	g := NewWithT(t)
	c := fleet.Client()
	p := &fleetv1.RunnerPool{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(pool), p)).To(Succeed())
	patch := client.MergeFrom(p.DeepCopy())
	change(&p.Spec)
	g.Expect(c.Patch(context.Background(), p, patch)).To(Succeed())
}

// removePool deletes the pool and waits until its Machines are gone, so later tests see the
// sample fleet as it was.
func removePool(t *testing.T, pool *fleetv1.RunnerPool) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	g.Expect(client.IgnoreNotFound(c.Delete(ctx, pool))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pool), &fleetv1.RunnerPool{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(pool.Namespace), client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool.Name})).To(Succeed())
		g.Expect(machines.Items).To(BeEmpty())
	}, 90*time.Second, 250*time.Millisecond).Should(Succeed(), "the pickup pool and its runners are gone")
}
