package demand_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

func TestRecordAppliesOnlyForwardTransitions(t *testing.T) {
	const (
		q = platform.JobQueued
		w = platform.JobWaiting
		p = platform.JobInProgress
		c = platform.JobCompleted
	)
	tests := []struct {
		name    string
		events  []platform.JobState
		changed []bool
		final   platform.JobState
	}{
		{name: "in order", events: []platform.JobState{q, p, c}, changed: []bool{true, true, true}, final: c},
		{name: "a held job is recorded as waiting", events: []platform.JobState{w}, changed: []bool{true}, final: w},
		{name: "approval releases a held job", events: []platform.JobState{w, q, p, c}, changed: []bool{true, true, true, true}, final: c},
		{name: "a late waiting after queued changes nothing", events: []platform.JobState{q, w, p}, changed: []bool{true, false, true}, final: p},
		{name: "a held job may start at once", events: []platform.JobState{w, p}, changed: []bool{true, true}, final: p},
		{name: "completed before queued", events: []platform.JobState{c, q}, changed: []bool{true, false}, final: c},
		{name: "in progress before queued", events: []platform.JobState{p, q, c}, changed: []bool{true, false, true}, final: c},
		{name: "skipping in progress", events: []platform.JobState{q, c, p}, changed: []bool{true, true, false}, final: c},
		{name: "unknown job completed", events: []platform.JobState{c}, changed: []bool{true}, final: c},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			pool := createPool(t, builder.NewRunnerPool("pool", ""))
			store := newStore(newClock())
			for i, state := range tt.events {
				changed, err := store.Record(ctx, pool, jobEvent(7, state))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(changed).To(Equal(tt.changed[i]), "event %d (%s)", i, state)
			}
			d, err := store.Snapshot(ctx, pool)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Jobs).To(HaveLen(1))
			g.Expect(d.Jobs["7"].State).To(Equal(tt.final))
		})
	}
}

// TestHeldJobsAreNotDemand: a job held before it is offered to runners (GitHub's waiting for an
// environment's approval, GitLab's manual, Buildkite's blocked) is in the ledger but is not
// queued demand, so no VM boots for it; its release makes it demand.
func TestHeldJobsAreNotDemand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	store := newStore(newClock())

	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobWaiting))).To(BeTrue())
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero(), "a held job is not demand")
	g.Expect(d.QueuedByLabelSet()).To(BeEmpty())
	g.Expect(d.Jobs["1"].FirstQueued.IsZero()).To(BeTrue())

	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(1), "approved: now it is demand")
	g.Expect(d.Jobs["1"].FirstQueued.IsZero()).To(BeFalse(), "latency is measured from the release")
}

func TestRecordIgnoresDuplicatesAndReplays(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)

	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
	first := clk.Now()
	clk.Advance(time.Minute)
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeFalse())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobInProgress))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobInProgress))).To(BeFalse())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeFalse())

	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Busy).To(Equal(map[string]string{"runner-1": "1"}))
	g.Expect(d.Jobs["1"].FirstQueued).To(Equal(first), "a replay must not move the first-queued time")
	g.Expect(d.Jobs["1"].Transition).To(Equal(clk.Now()))
	g.Expect(d.Jobs["1"].LabelSet).To(Equal("linux"))
}

func TestRecordUsesObservedTime(t *testing.T) {
	g := NewWithT(t)
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	store := newStore(newClock())
	received := time.Unix(1_700_000_000, 0)

	g.Expect(store.Record(demand.WithObservedAt(context.Background(), received), pool, jobEvent(1, platform.JobQueued))).To(BeTrue())

	d, err := store.Snapshot(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs["1"].FirstQueued).To(Equal(received))
}

func TestConcurrentRecordsOfDifferentJobsAllLand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	store := newStore(newClock())

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			changed, err := store.Record(ctx, pool, jobEvent(int64(100+i), platform.JobQueued))
			if err == nil && !changed {
				err = errors.New("a new job was reported unchanged")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(20))
}

func TestTwoReplicasRecordingOneJobStoreItOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	replicas := []*demand.Store{newStore(newClock()), newStore(newClock())}

	var wg sync.WaitGroup
	var mu sync.Mutex
	changes := 0
	var errs []error
	for i := range 10 {
		wg.Go(func() {
			changed, err := replicas[i%2].Record(ctx, pool, jobEvent(42, platform.JobQueued))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if changed {
				changes++
			}
		})
	}
	wg.Wait()

	g.Expect(errs).To(BeEmpty())

	g.Expect(changes).To(Equal(1), "exactly one replica applies the transition")
	d, err := replicas[1].Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs).To(HaveLen(1))
	g.Expect(d.Queued).To(Equal(1))
}

func TestCompletedRecordsExpireAfterRetention(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)

	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobCompleted))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobQueued))).To(BeTrue())
	clk.Advance(demand.DefaultRetention - time.Minute)
	g.Expect(store.Record(ctx, pool, jobEvent(3, platform.JobQueued))).To(BeTrue())
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs).To(HaveKey("1"), "within retention the completed record still dedupes")
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeFalse())

	clk.Advance(2 * time.Minute)
	g.Expect(store.Record(ctx, pool, jobEvent(4, platform.JobQueued))).To(BeTrue())
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs).NotTo(HaveKey("1"), "pruned on the next write after retention")
	g.Expect(d.Jobs).To(HaveKey("2"), "queued jobs are demand and never expire")
	g.Expect(d.Queued).To(Equal(3))
}

func TestLedgerSizeIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	store.MaxRecords = 4

	for id := int64(1); id <= 3; id++ {
		g.Expect(store.Record(ctx, pool, jobEvent(id, platform.JobCompleted))).To(BeTrue())
		clk.Advance(time.Second)
	}
	g.Expect(store.Record(ctx, pool, jobEvent(10, platform.JobQueued))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(11, platform.JobQueued))).To(BeTrue())
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs).To(HaveLen(4))
	g.Expect(d.Jobs).NotTo(HaveKey("1"), "the oldest completed record goes first")

	g.Expect(store.Record(ctx, pool, jobEvent(12, platform.JobQueued))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(13, platform.JobQueued))).To(BeTrue())
	_, err = store.Record(ctx, pool, jobEvent(14, platform.JobQueued))
	g.Expect(err).To(MatchError(demand.ErrLedgerFull))
	g.Expect(store.Record(ctx, pool, jobEvent(10, platform.JobInProgress))).To(BeTrue(), "known jobs still move forward")
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs).To(HaveLen(4))
	g.Expect(d.Queued).To(Equal(3))
}

func TestLedgerConfigMapFormatAndOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("linux", ""))
	clk := newClock()
	store := newStore(clk)

	g.Expect(store.Record(ctx, pool, jobEvent(29679449, platform.JobQueued, "Self-Hosted", "X64", "Linux"))).To(BeTrue())
	clk.Advance(5 * time.Second)
	g.Expect(store.Record(ctx, pool, jobEvent(29679449, platform.JobInProgress))).To(BeTrue())

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, demand.ConfigMapKey(pool), cm)).To(Succeed())
	g.Expect(cm.Name).To(Equal("linux-jobs"))
	g.Expect(cm.Labels).To(HaveKeyWithValue(fleetv1.RunnerPoolNameLabel, "linux"))
	g.Expect(cm.OwnerReferences).To(ConsistOf(And(
		HaveField("Kind", "RunnerPool"), HaveField("Name", "linux"), HaveField("UID", pool.UID))))
	g.Expect(cm.Data).To(HaveLen(1))
	var wire map[string]any
	g.Expect(json.Unmarshal([]byte(cm.Data["29679449"]), &wire)).To(Succeed())
	g.Expect(wire).To(Equal(map[string]any{
		"s": "in_progress", "l": "linux,x64", "r": "runner-29679449",
		"t": float64(1_800_000_005), "q": float64(1_800_000_000),
	}))
	g.Expect(strings.Contains(cm.Data["29679449"], " ")).To(BeFalse(), "records are compact")
}

func TestSnapshotOfPoolWithoutLedger(t *testing.T) {
	g := NewWithT(t)
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	d, err := newStore(newClock()).Snapshot(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Busy).To(BeEmpty())
	g.Expect(d.Jobs).To(BeEmpty())
}

type observedJobs struct {
	mu     sync.Mutex
	states []platform.JobState
	at     []time.Time
}

func (o *observedJobs) ObserveJob(_ context.Context, _ *fleetv1.RunnerPool, ev platform.JobEvent, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.states = append(o.states, ev.State)
	o.at = append(o.at, at)
}

// TestJobObserverSeesEachAppliedEventOnce: the job history hears of exactly the events the ledger
// applied, with the ledger's time, never of duplicates, replays or backward moves.
func TestJobObserverSeesEachAppliedEventOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	seen := &observedJobs{}
	store.Jobs = seen
	for _, s := range []platform.JobState{platform.JobQueued, platform.JobQueued, platform.JobInProgress, platform.JobQueued,
		platform.JobCompleted, platform.JobCompleted} {
		_, err := store.Record(ctx, pool, jobEvent(3, s))
		g.Expect(err).NotTo(HaveOccurred())
		clk.Advance(time.Second)
	}
	g.Expect(seen.states).To(Equal([]platform.JobState{platform.JobQueued, platform.JobInProgress, platform.JobCompleted}))
	g.Expect(seen.at[1].Sub(seen.at[0])).To(Equal(2 * time.Second))
}
