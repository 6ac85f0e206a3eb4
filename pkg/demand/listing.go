package demand

import (
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// listing is when one of the platform's listings was taken, as applyListing needs it.
type listing struct {
	// began is when the listing started: every job it shows was in that state at began or later.
	began time.Time
	// now is the time of the ledger write, the transition time of what it changes.
	now time.Time
	// minAge is how far the platform's listings may trail its webhooks (GitHub serves lists
	// from caches that lag its deliveries by seconds): a delivery received less than minAge
	// before the listing began may be newer than what the listing shows.
	minAge time.Duration
}

// effect is what applying a listing did to one record, for the counts Repair returns.
type effect int

const (
	unchanged     effect = iota
	touched              // written, demand unchanged
	demandAdded          // the job is demand now
	demandRemoved        // the job is no demand any more
)

// applyListing returns what the ledger should hold for job j, which the platform's listing shows
// in state, given old (known says whether the ledger holds the job at all). The rule, "the
// platform's listing wins over any delivery":
//
//   - a job the ledger lacks is added in the listed state;
//   - a completion the repair presumed is undone (the job is queued or held again, its first
//     queued time kept);
//   - a job a delivery called in progress or completed that the listing shows queued or held goes
//     back to the listed state and is marked Disputed: a delivery lied (whoever holds the
//     receiver's secret can send one) or is stale. A delivery received less than minAge before
//     the listing began is kept for now, since the job may have really gone queued -> in progress
//     -> completed while the listing was taken: the next listing, begun after it, decides. A job
//     the platform really finished is never listed queued again (a retry is a new job), so it
//     stays done;
//   - a job the ledger holds as queued that the listing shows held goes back to waiting, and a
//     held one it shows queued is queued (released, its queued delivery lost);
//   - a disputed job still waiting for a runner that the listing shows in progress (polls list
//     those) is in progress, on the runner the listing names: only listings move a disputed job on.
//
// A job that is not listed is handled by Repair's presumption of completion, not here.
func applyListing(old Record, known bool, j platform.Job, state platform.JobState, l listing) (Record, effect) {
	r := old
	switch state {
	case platform.JobQueued, platform.JobWaiting:
	case platform.JobInProgress:
		if !known || !old.Disputed || !old.leavesQueue(state) {
			return old, unchanged
		}
		r.State, r.Transition, r.Presumed, r.Unlisted = platform.JobInProgress, l.now, false, 0
		if j.RunnerName != "" {
			r.Runner = j.RunnerName
		}
		if old.State.NeedsRunner() {
			return r, demandRemoved
		}
		return r, touched
	default:
		return old, unchanged
	}
	eff := touched
	if state.NeedsRunner() {
		eff = demandAdded
	}
	switch {
	case !known:
		r = Record{State: state, LabelSet: platform.LabelSetKey(j.Labels), Transition: l.now}
		if state.NeedsRunner() {
			r.FirstQueued = l.now
		}
		return r, eff
	case old.Presumed:
		// Presumed gone too soon: the platform still has it waiting.
		r.State, r.Transition, r.Presumed, r.Unlisted = state, l.now, false, 0
		return r, eff
	case overruled(old, l):
		r.State, r.Transition, r.Unlisted, r.Disputed = state, l.now, 0, true
		r.Runner = "" // named by the delivery the platform contradicts
		if state.NeedsRunner() && r.FirstQueued.IsZero() {
			r.FirstQueued = l.now
		}
		return r, eff
	case old.State == platform.JobQueued && state == platform.JobWaiting:
		r.State, r.Transition, r.Unlisted = platform.JobWaiting, l.now, 0
		return r, demandRemoved
	case old.State == platform.JobWaiting && state == platform.JobQueued:
		// Released, its queued delivery lost (or a held delivery sent ahead of it).
		r.State, r.Transition, r.Unlisted = platform.JobQueued, l.now, 0
		if r.FirstQueued.IsZero() {
			r.FirstQueued = l.now
		}
		return r, demandAdded
	case old.Unlisted > 0:
		r.Unlisted = 0
		return r, touched
	}
	return old, unchanged
}

// overruled reports whether a listing that shows a job waiting for a runner (or held) overrides
// what the ledger holds: a running or completed state, not a presumed one, from an event received
// at least minAge before the listing began.
func overruled(r Record, l listing) bool {
	if r.Presumed || (r.State != platform.JobInProgress && r.State != platform.JobCompleted) {
		return false
	}
	// Transitions are stored in whole seconds, so the event may be up to a second later.
	return !r.Transition.Add(time.Second).After(l.began.Add(-l.minAge))
}
