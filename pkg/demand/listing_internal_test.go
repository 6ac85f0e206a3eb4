package demand

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// TestApplyListing: the platform's listing wins over any delivery, for completed and running
// alike, except over a delivery the listing may predate; a presumed completion is undone; a
// disputed job leaves the queue only on a listing's word.
func TestApplyListing(t *testing.T) {
	const minAge = 30 * time.Second
	began := time.Unix(1_800_000_000, 0)
	l := listing{began: began, now: began.Add(5 * time.Second), minAge: minAge}
	queuedAt := began.Add(-10 * time.Minute)
	longBefore := began.Add(-minAge - 2*time.Second)
	job := platform.Job{ID: "7", Labels: []string{"linux"}, RunnerName: "linux-abc"}
	rec := func(state platform.JobState, at time.Time) Record {
		return Record{State: state, LabelSet: "linux", Transition: at, FirstQueued: queuedAt}
	}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }

	for _, tt := range []struct {
		name   string
		old    Record
		known  bool
		listed platform.JobState
		want   Record
		effect effect
	}{
		{name: "a job the ledger lacks is added", listed: platform.JobQueued,
			want: Record{State: platform.JobQueued, LabelSet: "linux", Transition: l.now, FirstQueued: l.now}, effect: demandAdded},
		{name: "a held job the ledger lacks is added, no demand", listed: platform.JobWaiting,
			want: Record{State: platform.JobWaiting, LabelSet: "linux", Transition: l.now}, effect: touched},
		{name: "a presumed completion is undone", known: true, listed: platform.JobQueued,
			old:  with(rec(platform.JobCompleted, longBefore), func(r *Record) { r.Presumed = true }),
			want: rec(platform.JobQueued, l.now), effect: demandAdded},
		{name: "a completion a delivery claimed is overruled", known: true, listed: platform.JobQueued,
			old:  with(rec(platform.JobCompleted, longBefore), func(r *Record) { r.Runner = "forged" }),
			want: with(rec(platform.JobQueued, l.now), func(r *Record) { r.Disputed = true }), effect: demandAdded},
		{name: "a start a delivery claimed is overruled", known: true, listed: platform.JobQueued,
			old:  with(rec(platform.JobInProgress, longBefore), func(r *Record) { r.Runner = "victim-runner" }),
			want: with(rec(platform.JobQueued, l.now), func(r *Record) { r.Disputed = true }), effect: demandAdded},
		{name: "a job first seen completed gets a first-queued time", known: true, listed: platform.JobQueued,
			old:  Record{State: platform.JobCompleted, LabelSet: "linux", Transition: longBefore},
			want: Record{State: platform.JobQueued, LabelSet: "linux", Transition: l.now, FirstQueued: l.now, Disputed: true}, effect: demandAdded},
		{name: "a completion the listing shows held is overruled, no demand", known: true, listed: platform.JobWaiting,
			old:  rec(platform.JobCompleted, longBefore),
			want: with(rec(platform.JobWaiting, l.now), func(r *Record) { r.Disputed = true }), effect: touched},
		{name: "a completion received less than minAge before the listing began stands", known: true, listed: platform.JobQueued,
			old: rec(platform.JobCompleted, began.Add(-minAge+time.Second)), want: rec(platform.JobCompleted, began.Add(-minAge+time.Second)), effect: unchanged},
		{name: "a completion received while the listing ran stands", known: true, listed: platform.JobQueued,
			old: rec(platform.JobCompleted, began.Add(time.Second)), want: rec(platform.JobCompleted, began.Add(time.Second)), effect: unchanged},
		{name: "a start received while the listing ran stands", known: true, listed: platform.JobQueued,
			old: rec(platform.JobInProgress, began.Add(time.Second)), want: rec(platform.JobInProgress, began.Add(time.Second)), effect: unchanged},
		{name: "a queued job listed held is held", known: true, listed: platform.JobWaiting,
			old: rec(platform.JobQueued, longBefore), want: rec(platform.JobWaiting, l.now), effect: demandRemoved},
		{name: "a held job listed queued is queued", known: true, listed: platform.JobQueued,
			old:  Record{State: platform.JobWaiting, LabelSet: "linux", Transition: began.Add(time.Second)},
			want: Record{State: platform.JobQueued, LabelSet: "linux", Transition: l.now, FirstQueued: l.now}, effect: demandAdded},
		{name: "a queued job listed queued is left alone", known: true, listed: platform.JobQueued,
			old: rec(platform.JobQueued, longBefore), want: rec(platform.JobQueued, longBefore), effect: unchanged},
		{name: "a listing ends a run of misses", known: true, listed: platform.JobQueued,
			old:  with(rec(platform.JobQueued, longBefore), func(r *Record) { r.Unlisted = 1 }),
			want: rec(platform.JobQueued, longBefore), effect: touched},
		{name: "a disputed queued job listed in progress starts, on the listed runner", known: true, listed: platform.JobInProgress,
			old:  with(rec(platform.JobQueued, longBefore), func(r *Record) { r.Disputed = true }),
			want: with(rec(platform.JobInProgress, l.now), func(r *Record) { r.Disputed, r.Runner = true, "linux-abc" }), effect: demandRemoved},
		{name: "an undisputed job listed in progress is the deliveries' to move", known: true, listed: platform.JobInProgress,
			old: rec(platform.JobQueued, longBefore), want: rec(platform.JobQueued, longBefore), effect: unchanged},
		{name: "a job the ledger lacks listed in progress is not added here", listed: platform.JobInProgress,
			want: Record{}, effect: unchanged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, eff := applyListing(tt.old, tt.known, job, tt.listed, l)
			g.Expect(eff).To(Equal(tt.effect))
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestDisputedJobsLeaveTheQueueOnlyOnAListing: once a listing contradicted a delivery, no delivery
// takes the job out of the queue (whoever forged one can forge the next), while a held disputed
// job may still be released by one.
func TestDisputedJobsLeaveTheQueueOnlyOnAListing(t *testing.T) {
	for _, tt := range []struct {
		name  string
		r     Record
		to    platform.JobState
		leave bool
	}{
		{"queued, started", Record{State: platform.JobQueued}, platform.JobInProgress, true},
		{"queued, completed", Record{State: platform.JobQueued}, platform.JobCompleted, true},
		{"held, completed", Record{State: platform.JobWaiting}, platform.JobCompleted, true},
		{"held, released", Record{State: platform.JobWaiting}, platform.JobQueued, false},
		{"presumed gone, started", Record{State: platform.JobCompleted, Presumed: true}, platform.JobInProgress, true},
		{"running, completed", Record{State: platform.JobInProgress}, platform.JobCompleted, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.r.leavesQueue(tt.to)).To(Equal(tt.leave))
		})
	}
}
