package demand_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestLedgerCountsEachJobOnceUnderAnyDelivery records generated job events, each delivered once
// or more, in any order, and checks that the ledger holds every job exactly once, in the furthest
// state delivered for it, and counts as demand exactly the jobs whose furthest state is queued:
// duplicated, replayed and reordered webhooks neither lose a job nor count one twice.
func TestLedgerCountsEachJobOnceUnderAnyDelivery(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		// Every check writes a ConfigMap per delivery to the API server: keep the run bounded.
		_ = f.Value.Set("30")
		defer func() { _ = f.Value.Set(f.DefValue) }()
	}
	order := []platform.JobState{platform.JobWaiting, platform.JobQueued, platform.JobInProgress, platform.JobCompleted}
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		pool := createPool(t, builder.NewRunnerPool("pool", ""))
		store := newStore(newClock())
		type delivery struct {
			job   int64
			state int
		}
		var deliveries []delivery
		furthest := map[int64]int{}
		jobs := rapid.IntRange(1, 4).Draw(rt, "jobs")
		for j := range jobs {
			id := int64(100 + j)
			// The states the platform sent for this job: a non-empty subset, each delivered
			// one to three times.
			mask := rapid.IntRange(1, 15).Draw(rt, fmt.Sprint("states", id))
			for s := range order {
				if mask&(1<<s) == 0 {
					continue
				}
				furthest[id] = s
				for range rapid.IntRange(1, 3).Draw(rt, fmt.Sprint("copies", id, s)) {
					deliveries = append(deliveries, delivery{id, s})
				}
			}
		}
		deliveries = rapid.Permutation(deliveries).Draw(rt, "order")
		for _, d := range deliveries {
			if _, err := store.Record(ctx, pool, jobEvent(d.job, order[d.state])); err != nil {
				rt.Fatalf("record job %d %s: %v", d.job, order[d.state], err)
			}
		}
		snap, err := store.Snapshot(ctx, pool)
		if err != nil {
			rt.Fatalf("snapshot: %v", err)
		}
		if len(snap.Jobs) != jobs {
			rt.Fatalf("ledger holds %d jobs, %d were delivered: %v", len(snap.Jobs), jobs, snap.Jobs)
		}
		wantQueued, wantBusy := 0, 0
		for id, s := range furthest {
			r, ok := snap.Jobs[demand.JobKey(fmt.Sprint(id))]
			if !ok {
				rt.Fatalf("job %d lost", id)
			}
			if r.State != order[s] {
				rt.Fatalf("job %d is %s, furthest delivered %s", id, r.State, order[s])
			}
			switch order[s] {
			case platform.JobQueued:
				wantQueued++
			case platform.JobInProgress:
				wantBusy++
			}
		}
		if snap.Queued != wantQueued || len(snap.Busy) != wantBusy {
			rt.Fatalf("demand queued %d busy %d, want %d and %d", snap.Queued, len(snap.Busy), wantQueued, wantBusy)
		}
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pool.Namespace}})
	})
}

// TestNoDeliveryHidesAListedJob: the platform keeps a few jobs queued while whoever holds the
// receiver's secret sends any deliveries about them (any state, any number, any order, announced
// ahead or not) between repairs at any times. Once a listing begins minAge after the last
// delivery, every job is demand; deliveries sent after that take no disputed job (one a listing
// already contradicted a delivery about) out of the queue, and the next listing restores the
// rest: the platform's listing wins over any delivery.
func TestNoDeliveryHidesAListedJob(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("25") // every step writes a ConfigMap to the API server
		defer func() { _ = f.Value.Set(f.DefValue) }()
	}
	const minAge = 30 * time.Second
	states := []platform.JobState{platform.JobWaiting, platform.JobQueued, platform.JobInProgress, platform.JobCompleted}
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		pool := createPool(t, builder.NewRunnerPool("pool", ""))
		clk := newClock()
		store := newStore(clk)
		jobs := rapid.IntRange(1, 3).Draw(rt, "jobs")
		var listed []platform.Job
		for j := range jobs {
			listed = append(listed, platform.Job{ID: fmt.Sprint(100 + j), State: platform.JobQueued, Labels: []string{"linux"}})
		}
		deliver := func(label string) {
			id := int64(100 + rapid.IntRange(0, jobs-1).Draw(rt, label+"job"))
			st := rapid.SampledFrom(states).Draw(rt, label+"state")
			if _, err := store.Record(ctx, pool, jobEvent(id, st)); err != nil {
				rt.Fatalf("record job %d %s: %v", id, st, err)
			}
		}
		repair := func() {
			if _, _, err := store.Repair(demand.WithListedAt(ctx, clk.Now()), pool, listed, minAge); err != nil {
				rt.Fatalf("repair: %v", err)
			}
		}
		steps := rapid.IntRange(1, 10).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("step", i)) {
			case 0:
				deliver(fmt.Sprint("delivery", i))
			case 1:
				clk.Advance(time.Duration(rapid.IntRange(1, 40).Draw(rt, fmt.Sprint("wait", i))) * time.Second)
			default:
				repair()
			}
		}
		clk.Advance(minAge + 2*time.Second)
		repair()
		snapshot := func() demand.Demand {
			snap, err := store.Snapshot(ctx, pool)
			if err != nil {
				rt.Fatalf("snapshot: %v", err)
			}
			return snap
		}
		check := func(when string) map[string]bool {
			snap := snapshot()
			if snap.Queued != jobs {
				rt.Fatalf("%s: %d of %d listed jobs are demand: %v", when, snap.Queued, jobs, snap.Jobs)
			}
			disputed := map[string]bool{}
			for id, r := range snap.Jobs {
				disputed[id] = r.Disputed
			}
			return disputed
		}
		disputed := check("after a listing")
		for i := range rapid.IntRange(0, 4).Draw(rt, "after") {
			deliver(fmt.Sprint("late", i))
		}
		for id, r := range snapshot().Jobs {
			if disputed[id] && !r.State.NeedsRunner() {
				rt.Fatalf("a delivery took disputed job %s out of the queue: %+v", id, r)
			}
		}
		clk.Advance(minAge + 2*time.Second)
		repair()
		check("after the next listing")
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pool.Namespace}})
	})
}
