package demand_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

type pickups struct {
	mu   sync.Mutex
	seen []demand.Pickup
}

func (p *pickups) ObservePickup(_ context.Context, _ *fleetv1.RunnerPool, pk demand.Pickup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, pk)
}

// runner creates the BootstrapConfig and MachineClaim of a pool's runner: attested at attested
// (nil: not yet), with the claim's warm mark (empty: none).
func runner(t *testing.T, ns, name string, attested *time.Time, warm string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	bc := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	g.Expect(env.Client.Create(ctx, bc)).To(Succeed())
	if attested != nil {
		bc.Status.AttestedTime = &metav1.Time{Time: *attested}
		g.Expect(env.Client.Status().Update(ctx, bc)).To(Succeed())
	}
	claim := builder.NewMachineClaim(name, ns).Build()
	if warm != "" {
		claim.Annotations = map[string]string{infrav1.WarmAnnotation: warm}
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
}

// TestPickupPaths: each job taken from the queue is reported once, to the millisecond, and its
// path follows the runner that took it: attested before the job was queued (hot), a warm VM
// started after (warm), a VM cloned after (cold); a runner that is not the pool's is not counted.
func TestPickupPaths(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	seen := &pickups{}
	store.Pickups = seen

	queued := clk.Now().Add(300 * time.Millisecond)
	before, after := queued.Add(-time.Minute), queued.Add(5*time.Second)
	runner(t, pool.Namespace, "hot-1", &before, "")
	runner(t, pool.Namespace, "warm-1", &after, infrav1.WarmStarted)
	runner(t, pool.Namespace, "warmhot-1", &before, infrav1.WarmStarted)
	runner(t, pool.Namespace, "cold-1", &after, "")

	for id, name := range map[int64]string{1: "hot-1", 2: "warm-1", 3: "warmhot-1", 4: "cold-1", 5: "stranger"} {
		g.Expect(store.Record(demand.WithObservedAt(ctx, queued), pool, jobEvent(id, platform.JobQueued))).To(BeTrue())
		ev := jobEvent(id, platform.JobInProgress)
		ev.RunnerName = name
		started := queued.Add(time.Duration(id) * 1500 * time.Millisecond)
		g.Expect(store.Record(demand.WithObservedAt(ctx, started), pool, ev)).To(BeTrue())
		// A redelivery, and one through another store, change nothing and are not counted again.
		g.Expect(store.Record(demand.WithObservedAt(ctx, started.Add(time.Second)), pool, ev)).To(BeFalse())
		other := newStore(clk)
		other.Pickups = seen
		g.Expect(other.Record(ctx, pool, ev)).To(BeFalse())
	}
	g.Expect(seen.seen).To(HaveLen(5), "one report per job")
	paths := map[string]string{}
	for _, p := range seen.seen {
		g.Expect(p.Queued).To(Equal(queued), "first-queued time kept to the millisecond")
		g.Expect(p.Started.Sub(p.Queued) % (1500 * time.Millisecond)).To(BeZero())
		path, ok, err := demand.PickupPath(ctx, env.Client, pool.Namespace, p)
		g.Expect(err).NotTo(HaveOccurred())
		if ok {
			paths[p.Runner] = path
		}
	}
	g.Expect(paths).To(Equal(map[string]string{
		"hot-1": metrics.PickupHot, "warm-1": metrics.PickupWarm, "warmhot-1": metrics.PickupHot, "cold-1": metrics.PickupCold,
	}))
}

// TestPickupMetricsCountOncePerJob: concurrent deliveries of one job's in_progress through several
// stores observe hyperfleet_job_pickup_seconds once.
func TestPickupMetricsCountOncePerJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	runner(t, pool.Namespace, "cold-9", nil, "")
	metrics.JobPickupSeconds.Reset()
	g.Expect(newStore(clk).Record(ctx, pool, jobEvent(9, platform.JobQueued))).To(BeTrue())
	ev := jobEvent(9, platform.JobInProgress)
	ev.RunnerName = "cold-9"
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := newStore(clk).Record(ctx, pool, ev)
			g.Expect(err).NotTo(HaveOccurred())
		}()
	}
	wg.Wait()
	m := &dto.Metric{}
	g.Expect(metrics.JobPickupSeconds.WithLabelValues("github", metrics.PickupCold).(prometheus.Histogram).Write(m)).To(Succeed())
	g.Expect(m.GetHistogram().GetSampleCount()).To(Equal(uint64(1)))
}

// TestPickupBeforeItsQueuedDelivery: a job whose in_progress is recorded before its queued
// delivery (picked up within moments, deliveries handled out of order) is still counted once, from
// the platform's creation time; the late queued delivery changes nothing.
func TestPickupBeforeItsQueuedDelivery(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	seen := &pickups{}
	store.Pickups = seen
	created := clk.Now().Add(-200 * time.Millisecond)
	ev := jobEvent(7, platform.JobInProgress)
	ev.RunnerName, ev.CreatedAt = "hot-7", created
	g.Expect(store.Record(ctx, pool, ev)).To(BeTrue())
	late := jobEvent(7, platform.JobQueued)
	late.CreatedAt = created
	g.Expect(store.Record(ctx, pool, late)).To(BeFalse())
	g.Expect(seen.seen).To(HaveLen(1))
	g.Expect(seen.seen[0].Queued).To(Equal(created))
	g.Expect(seen.seen[0].Started.Sub(seen.seen[0].Queued)).To(Equal(200 * time.Millisecond))
}
