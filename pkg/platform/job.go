package platform

import "time"

// JobState is where a job is in its life. GitHub's order is queued, waiting, in_progress,
// completed; waiting (held by a deployment protection rule) still needs a runner afterwards,
// so it ranks with queued.
type JobState string

// Job states.
const (
	JobQueued     JobState = "queued"
	JobWaiting    JobState = "waiting"
	JobInProgress JobState = "in_progress"
	JobCompleted  JobState = "completed"
)

func (s JobState) rank() int {
	switch s {
	case JobQueued, JobWaiting:
		return 1
	case JobInProgress:
		return 2
	case JobCompleted:
		return 3
	default:
		return 0
	}
}

// Valid reports whether s is a known state.
func (s JobState) Valid() bool { return s.rank() > 0 }

// NeedsRunner reports whether a job in this state is demand: queued or waiting.
func (s JobState) NeedsRunner() bool { return s.rank() == 1 }

// IsForward reports whether moving a job from one state to another is progress. Webhooks
// arrive late, twice or out of order; a receiver applies an event only when it is forward.
// queued and waiting rank equal, so switching between them is not forward: it changes nothing
// about demand. Unknown states are never forward; anything is forward from the zero state.
func IsForward(from, to JobState) bool {
	if !to.Valid() {
		return false
	}
	if from == "" {
		return true
	}
	return from.Valid() && to.rank() > from.rank()
}

// JobEvent is one webhook about one job, in platform-neutral terms.
type JobEvent struct {
	// DeliveryID identifies the delivery (GitHub: X-GitHub-Delivery); redeliveries reuse it.
	DeliveryID string
	// JobID identifies the job; dedupe on it together with State.
	JobID int64
	RunID int64
	State JobState
	// Labels are the job's runs-on labels, lower-cased.
	Labels []string
	// Repository is "owner/name"; Organization is empty for repositories owned by a user.
	Repository   string
	Organization string
	// InstallationID is the GitHub App installation that received the event.
	InstallationID int64
	// RunnerID and RunnerName name the runner once one took the job (in_progress, completed).
	RunnerID   int64
	RunnerName string
	// Conclusion is set on completed jobs: success, failure, cancelled, skipped...
	Conclusion   string
	Name         string
	WorkflowName string
	CreatedAt    time.Time
	StartedAt    time.Time
	CompletedAt  time.Time
}

// Scope returns the narrowest scope the job belongs to: its repository.
func (e JobEvent) Scope() Scope {
	return Scope{Organization: e.Organization, Repository: e.Repository}
}

// Job is a job as the platform's API reports it, for demand queries.
type Job struct {
	ID         int64
	RunID      int64
	Name       string
	State      JobState
	Labels     []string // lower-cased
	Repository string   // owner/name
	RunnerName string
	CreatedAt  time.Time
}

// WebhookKind says what a parsed webhook is about.
type WebhookKind string

// Webhook kinds.
const (
	// WebhookJob carries a JobEvent.
	WebhookJob WebhookKind = "job"
	// WebhookPing is sent when a webhook is created; answer 200.
	WebhookPing WebhookKind = "ping"
	// WebhookIgnored is an event type or action HyperFleet does not act on; answer 200 or 202.
	WebhookIgnored WebhookKind = "ignored"
)

// Webhook is a verified, parsed delivery.
type Webhook struct {
	Kind       WebhookKind
	Event      string // the platform's event type, e.g. workflow_job
	DeliveryID string
	Job        *JobEvent // set when Kind is WebhookJob
}
