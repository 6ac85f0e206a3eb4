package recorder

import (
	"context"
	"net/url"
	"time"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// ObserveJob records a job event its pool's ledger applied (demand.JobObserver): what the
// platform said about the job, the pool it went to, and when.
func (r *Recorder) ObserveJob(_ context.Context, pool *fleetv1.RunnerPool, ev platform.JobEvent, at time.Time) {
	r.Job(FromJobEvent(pool, ev, at))
}

// FromJobEvent is the piece of a job's record an event tells: the platform's own times where it
// gives them, else when the ledger saw the event.
func FromJobEvent(pool *fleetv1.RunnerPool, ev platform.JobEvent, at time.Time) history.JobRecord {
	rec := history.JobRecord{
		Platform: string(platform.KindOf(pool)), JobID: ev.JobID, Namespace: pool.Namespace, Pool: pool.Name,
		Repository: ev.Repository, Labels: ev.Labels, Runner: ev.RunnerName, JobURL: webURL(ev.URL),
	}
	either := func(platformTime time.Time) *time.Time {
		if !platformTime.IsZero() {
			return &platformTime
		}
		return &at
	}
	if !ev.CreatedAt.IsZero() {
		rec.Times.Queued = &ev.CreatedAt
	}
	switch ev.State {
	case platform.JobQueued:
		rec.Times.Queued = either(ev.CreatedAt)
	case platform.JobInProgress:
		rec.Times.JobStarted = either(ev.StartedAt)
	case platform.JobCompleted:
		rec.Times.JobFinished = either(ev.CompletedAt)
		if !ev.StartedAt.IsZero() {
			rec.Times.JobStarted = &ev.StartedAt
		}
		rec.Outcome, rec.FailureReason = Outcome(ev.Conclusion)
	}
	return rec
}

// Outcome maps a platform's conclusion (as pkg/platform normalises it) to a record's outcome,
// with the reason for any but success.
func Outcome(conclusion string) (history.Outcome, string) {
	switch conclusion {
	case "success", "passed":
		return history.OutcomeSucceeded, ""
	case "failure", "failed", "timed_out":
		return history.OutcomeFailed, "the platform reported " + conclusion
	case "cancelled", "canceled", "skipped", "expired", "stale":
		return history.OutcomeCancelled, "the platform reported " + conclusion
	case "":
		return history.OutcomeUnknown, "the platform reported the job completed without a conclusion"
	}
	return history.OutcomeUnknown, "the platform reported " + conclusion
}

// webURL keeps a job's URL only when it is an http(s) address: it is shown as a link.
func webURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return raw
}
