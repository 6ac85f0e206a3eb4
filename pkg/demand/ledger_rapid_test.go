package demand_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

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
