package demand_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

func TestRepairAddsMissedJobsAndDropsVanishedOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	const minAge = time.Minute

	// 1 is still queued, 2 vanished (cancelled), 3 runs on our runner, 4 arrived just now.
	for _, id := range []int64{1, 2} {
		g.Expect(store.Record(ctx, pool, jobEvent(id, platform.JobQueued))).To(BeTrue())
	}
	g.Expect(store.Record(ctx, pool, jobEvent(3, platform.JobInProgress))).To(BeTrue())
	clk.Advance(2 * minAge)
	g.Expect(store.Record(ctx, pool, jobEvent(4, platform.JobQueued))).To(BeTrue())

	// The API lists 1, and 5 whose webhook was lost; 6 is reported in progress and is no demand;
	// 7 is held (waiting for an approval) and is no demand either.
	listed := []platform.Job{
		{ID: "1", State: platform.JobQueued, Labels: []string{"linux"}, Repository: "acme/api"},
		{ID: "5", State: platform.JobQueued, Labels: []string{"Linux", "self-hosted"}, Repository: "acme/api"},
		{ID: "6", State: platform.JobInProgress, Labels: []string{"linux"}, Repository: "acme/api"},
		{ID: "7", State: platform.JobWaiting, Labels: []string{"linux"}, Repository: "acme/api"},
	}
	added, removed, err := store.Repair(ctx, pool, listed, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(Equal(1))
	g.Expect(removed).To(BeZero(), "one listing that misses a job is no proof it is gone")
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs["2"]).To(And(HaveField("State", platform.JobQueued), HaveField("Unlisted", 1)))

	// The next listing misses it too: cancelled.
	added, removed, err = store.Repair(ctx, pool, listed, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{0, 1}))
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs["1"].State).To(Equal(platform.JobQueued))
	g.Expect(d.Jobs["2"].State).To(Equal(platform.JobCompleted))
	g.Expect(d.Jobs["3"].State).To(Equal(platform.JobInProgress))
	g.Expect(d.Jobs["4"].State).To(Equal(platform.JobQueued), "younger than minAge: the list may predate it")
	g.Expect(d.Jobs["5"]).To(And(HaveField("State", platform.JobQueued), HaveField("LabelSet", "linux")))
	g.Expect(d.Jobs).NotTo(HaveKey("6"))
	g.Expect(d.Jobs["7"].State).To(Equal(platform.JobWaiting))
	g.Expect(d.Queued).To(Equal(3))

	// Repeating the repair with the same truth changes nothing.
	added, removed, err = store.Repair(ctx, pool, listed, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{0, 0}))

	// A late queued replay of the job repair completed stays completed.
	g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobQueued))).To(BeFalse())
}

// TestRepairTrustsTheAPIForHeldJobs: a queued webhook followed by a job the API says is held
// again (the order webhooks imposed was wrong) stops counting as demand; once the API no longer
// lists a held job, it is completed like a vanished queued one.
func TestRepairTrustsTheAPIForHeldJobs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	const minAge = time.Minute
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
	clk.Advance(2 * minAge)

	held := []platform.Job{{ID: "1", State: platform.JobWaiting, Labels: []string{"linux"}, Repository: "acme/api"}}
	added, removed, err := store.Repair(ctx, pool, held, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{0, 1}))
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Jobs["1"].State).To(Equal(platform.JobWaiting))

	// Released by an approval: the queued webhook moves it forward again.
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobWaiting))).To(BeFalse())
	g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobWaiting))).To(BeTrue())

	// The API lists neither any more, twice: cancelled or run elsewhere.
	clk.Advance(2 * minAge)
	_, removed, err = store.Repair(ctx, pool, nil, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeZero())
	_, removed, err = store.Repair(ctx, pool, nil, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(1), "only the queued one was demand")
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Jobs["1"].State).To(Equal(platform.JobCompleted))
	g.Expect(d.Jobs["2"].State).To(Equal(platform.JobCompleted))
}

func TestRepairDoesNotResurrectFinishedJobs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	store := newStore(newClock())
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobCompleted))).To(BeTrue())

	// An API list older than the completed webhook still shows the job queued.
	added, removed, err := store.Repair(ctx, pool, []platform.Job{{ID: "1", State: platform.JobQueued, Labels: []string{"linux"}}}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{0, 0}))
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
}

// TestRepairUndoesAPresumedCompletion: a paged listing of a platform's queue misses jobs that
// shift between pages while others start (GitHub lists runs newest first, 100 a page). A queued
// job two such listings missed is presumed gone; when a later listing shows it queued again it is
// demand again, with its first-queued time kept, and a webhook saying it started or finished is
// taken. A job whose completion the platform announced stays completed whatever a list says.
func TestRepairUndoesAPresumedCompletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	const minAge = time.Minute
	for _, id := range []int64{1, 2, 3} {
		g.Expect(store.Record(ctx, pool, jobEvent(id, platform.JobQueued))).To(BeTrue())
	}
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	firstQueued := d.Jobs["1"].FirstQueued
	clk.Advance(2 * minAge)
	for range 2 {
		_, _, err := store.Repair(ctx, pool, nil, minAge)
		g.Expect(err).NotTo(HaveOccurred())
	}
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Jobs["1"]).To(And(HaveField("State", platform.JobCompleted), HaveField("Presumed", true)))

	// Job 1 is listed queued again; job 2 starts (its webhook had been late); job 3 is announced
	// completed by the platform and then listed by a stale listing.
	g.Expect(store.Record(ctx, pool, jobEvent(2, platform.JobInProgress))).To(BeTrue())
	g.Expect(store.Record(ctx, pool, jobEvent(3, platform.JobCompleted))).To(BeTrue())
	added, removed, err := store.Repair(ctx, pool, []platform.Job{
		{ID: "1", State: platform.JobQueued, Labels: []string{"linux"}},
		{ID: "3", State: platform.JobQueued, Labels: []string{"linux"}},
	}, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{1, 0}))
	d, err = store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(Equal(1))
	g.Expect(d.Jobs["1"]).To(And(HaveField("State", platform.JobQueued), HaveField("Presumed", false),
		HaveField("FirstQueued", firstQueued)))
	g.Expect(d.Jobs["2"]).To(And(HaveField("State", platform.JobInProgress), HaveField("Presumed", false)))
	g.Expect(d.Jobs["3"]).To(And(HaveField("State", platform.JobCompleted), HaveField("Presumed", false)))
	// A late queued delivery does not undo a presumption: only the platform's listing does.
	for range 2 {
		_, _, err := store.Repair(ctx, pool, nil, minAge)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeFalse())
}

// TestRepairOverrulesForgedDeliveries plays whoever holds a receiver's secret (on GitLab, every
// maintainer whose project or group webhook points at HyperFleet, and job IDs are sequential): a
// delivery says a job the platform still lists as queued is done or running, both before the job's
// queued delivery (announced ahead) and after it. The ledger takes the platform's listing over
// the delivery, once the listing began at least minAge after the delivery (a listing begun
// earlier may predate a real start or finish); from then on the job is disputed, and neither
// another forged delivery nor a late real one takes it out of the queue: only listings do.
func TestRepairOverrulesForgedDeliveries(t *testing.T) {
	const minAge = 30 * time.Second
	for _, forged := range []platform.JobState{platform.JobCompleted, platform.JobInProgress} {
		for _, ahead := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s ahead=%t", forged, ahead), func(t *testing.T) {
				g := NewWithT(t)
				ctx := context.Background()
				pool := createPool(t, builder.NewRunnerPool("pool", ""))
				clk := newClock()
				store := newStore(clk)
				if !ahead {
					g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
					clk.Advance(5 * time.Second)
				}
				g.Expect(store.Record(ctx, pool, jobEvent(1, forged))).To(BeTrue(), "the forged delivery is signed")
				if ahead {
					g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeFalse(), "not forward")
				}
				listed := []platform.Job{{ID: "1", State: platform.JobQueued, Labels: []string{"linux"}, Repository: "acme/api"}}
				repair := func() (int, int) {
					added, removed, err := store.Repair(demand.WithListedAt(ctx, clk.Now()), pool, listed, minAge)
					g.Expect(err).NotTo(HaveOccurred())
					return added, removed
				}
				snapshot := func() demand.Demand {
					d, err := store.Snapshot(ctx, pool)
					g.Expect(err).NotTo(HaveOccurred())
					return d
				}

				clk.Advance(minAge - 5*time.Second)
				g.Expect(repair()).To(BeZero(), "a listing begun soon after the delivery may predate a real start")
				g.Expect(snapshot().Queued).To(BeZero())

				clk.Advance(10 * time.Second)
				added, removed := repair()
				g.Expect([]int{added, removed}).To(Equal([]int{1, 0}))
				d := snapshot()
				g.Expect(d.Queued).To(Equal(1), "the platform's listing wins")
				g.Expect(d.Busy).To(BeEmpty(), "no runner is busy on the forged delivery's word")
				g.Expect(d.Jobs["1"]).To(And(HaveField("State", platform.JobQueued), HaveField("Disputed", true)))

				for _, again := range []platform.JobState{platform.JobInProgress, platform.JobCompleted} {
					g.Expect(store.Record(ctx, pool, jobEvent(1, again))).To(BeFalse(), "a disputed job leaves the queue on a listing only")
				}
				g.Expect(snapshot().Queued).To(Equal(1))

				// A runner took the job: a poll lists it in progress, and it ends.
				started := []platform.Job{{ID: "1", State: platform.JobInProgress, Labels: []string{"linux"}, RunnerName: "pool-abc"}}
				_, removed, err := store.Repair(ctx, pool, started, minAge)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(removed).To(Equal(1))
				d = snapshot()
				g.Expect(d.Queued).To(BeZero())
				g.Expect(d.Busy).To(HaveKeyWithValue("pool-abc", "1"))
				g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobCompleted))).To(BeTrue())
			})
		}
	}
}

// TestRepairKeepsAJobThatReallyFinished: a job goes queued -> in progress -> completed while a
// repair lists the scope, so the listing shows it queued after its completion was recorded. The
// completion stands, and the job is not demand again: the next listing no longer shows it.
func TestRepairKeepsAJobThatReallyFinished(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool := createPool(t, builder.NewRunnerPool("pool", ""))
	clk := newClock()
	store := newStore(clk)
	const minAge = 30 * time.Second
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobQueued))).To(BeTrue())
	clk.Advance(time.Minute)
	began := clk.Now()
	clk.Advance(2 * time.Second)
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobInProgress))).To(BeTrue())
	clk.Advance(20 * time.Second)
	g.Expect(store.Record(ctx, pool, jobEvent(1, platform.JobCompleted))).To(BeTrue())
	clk.Advance(10 * time.Second) // a long listing
	stale := []platform.Job{{ID: "1", State: platform.JobQueued, Labels: []string{"linux"}}}
	added, removed, err := store.Repair(demand.WithListedAt(ctx, began), pool, stale, minAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{added, removed}).To(Equal([]int{0, 0}))
	for range 3 {
		clk.Advance(time.Minute)
		_, _, err = store.Repair(demand.WithListedAt(ctx, clk.Now()), pool, nil, minAge)
		g.Expect(err).NotTo(HaveOccurred())
	}
	d, err := store.Snapshot(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Jobs["1"]).To(And(HaveField("State", platform.JobCompleted), HaveField("Presumed", false), HaveField("Disputed", false)))
}
