package demand_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// A pool with demand Both hears of each job from webhook deliveries (late, twice, out of order)
// and from polls of the API (Repair). The ledger counts each job once, whoever saw it first; a
// job the poll no longer lists as queued stops being demand; held jobs are demand in neither path.
func TestWebhookAndPollCountEachJobOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("both", ""))
	clk := newClock()
	store := newStore(clk)
	const minAge = 30 * time.Second
	queued := func(ids ...string) []platform.Job {
		var out []platform.Job
		for _, id := range ids {
			out = append(out, platform.Job{ID: id, State: platform.JobQueued, Labels: []string{"linux"}, Repository: "acme/api"})
		}
		return out
	}
	demandNow := func() int {
		d, err := store.Snapshot(ctx, pool)
		g.Expect(err).NotTo(HaveOccurred())
		return d.Queued
	}

	// Job 1: the delivery first, then the poll, then the same delivery again.
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued, "linux"))).To(BeTrue())
	added, _, err := store.Repair(ctx, pool, queued("1"), minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(BeZero(), "the poll sees a job the webhook already counted")
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued, "linux"))).To(BeFalse())
	g.Expect(demandNow()).To(Equal(1))

	// Job 2: the poll first, then its delivery, twice.
	added, _, err = store.Repair(ctx, pool, queued("1", "2"), minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(Equal(1))
	for range 2 {
		g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobQueued, "linux"))).To(BeFalse())
	}
	g.Expect(demandNow()).To(Equal(2))

	// Job 3 is held by an environment's protection rules: demand in neither path, in either order.
	g.Expect(store.Record(ctx, pool, jobEvent(3, platform.JobWaiting, "linux"))).To(BeTrue())
	held := append(queued("1", "2"), platform.Job{ID: "3", State: platform.JobWaiting, Labels: []string{"linux"}, Repository: "acme/api"})
	_, _, err = store.Repair(ctx, pool, held, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(store.Record(ctx, pool, jobEvent(3, platform.JobWaiting, "linux"))).To(BeFalse())
	g.Expect(demandNow()).To(Equal(2))

	// Job 1 starts on a runner: the in_progress delivery arrives, then a late queued replay of it,
	// then a poll that no longer lists it. One entry, in progress, no demand.
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobInProgress, "linux"))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued, "linux"))).To(BeFalse())
	clk.Advance(2 * minAge)
	_, removed, err := store.Repair(ctx, pool, held[1:], minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeZero())
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs["1"].State).To(Equal(platform.JobInProgress))
	g.Expect(d.Queued).To(Equal(1))

	// Job 2 is cancelled and no delivery says so (polling only): once two polls in a row no
	// longer list it, it is no longer demand, and its late queued delivery cannot bring it back.
	_, removed, err = store.Repair(ctx, pool, held[2:], minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeZero())
	_, removed, err = store.Repair(ctx, pool, held[2:], minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(1))
	g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobQueued, "linux"))).To(BeFalse())
	g.Expect(demandNow()).To(BeZero())

	// Job 4's delivery arrives after a poll that predates it (Both): the poll does not drop it
	// while it is younger than minAge; a later poll that lists it keeps it, once.
	g.Expect(store.Record(ctx, pool, jobEvent(4, platform.JobQueued, "linux"))).To(BeTrue())
	_, removed, err = store.Repair(ctx, pool, held[2:], minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeZero())
	added, _, err = store.Repair(ctx, pool, append(held[2:], queued("4")...), minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(BeZero())
	g.Expect(demandNow()).To(Equal(1))
}
