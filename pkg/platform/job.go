package platform

import "time"

// JobState is where a job is in its life, in the ledger's terms. Every platform maps its own
// states onto these four, and only JobQueued is demand:
//
//   - JobWaiting: held, not yet offered to runners, and maybe for hours: GitHub's waiting (an
//     environment's protection rules), GitLab's created, manual, scheduled and
//     waiting_for_resource, Buildkite's pending, blocked, waiting and limited. No VM boots for it.
//   - JobQueued: offered to runners now (GitHub queued, GitLab pending, Buildkite scheduled). A
//     VM boots for it. (Buildkite's assigned already has its agent: in progress.)
//   - JobInProgress: a runner took it.
//   - JobCompleted: it ended, whatever its conclusion.
//
// Order: waiting < queued < in_progress < completed. A held job is released to queued (an
// approval, a manual play, a schedule firing, a block step unblocked), so waiting -> queued is
// forward and boots a VM. A late or redelivered "waiting" after "queued" is not forward and is
// dropped: the job keeps counting as demand. If a platform really returns a queued job to a held
// state (rare: GitLab re-running a manual job, which is a new job ID anyway), the repair loop's API
// read replaces the ledger's state with the platform's own, whatever the order, so at worst one
// VM boots early and is reclaimed by its idle TTL.
type JobState string

// Job states.
const (
	JobWaiting    JobState = "waiting"
	JobQueued     JobState = "queued"
	JobInProgress JobState = "in_progress"
	JobCompleted  JobState = "completed"
)

func (s JobState) rank() int {
	switch s {
	case JobWaiting:
		return 1
	case JobQueued:
		return 2
	case JobInProgress:
		return 3
	case JobCompleted:
		return 4
	default:
		return 0
	}
}

// Valid reports whether s is a known state.
func (s JobState) Valid() bool { return s.rank() > 0 }

// NeedsRunner reports whether a job in this state is demand: queued only. A held (waiting) job
// is not demand until the platform releases it.
func (s JobState) NeedsRunner() bool { return s == JobQueued }

// IsHeld reports whether a job in this state waits for something other than a runner.
func (s JobState) IsHeld() bool { return s == JobWaiting }

// IsForward reports whether moving a job from one state to another is progress. Webhooks
// arrive late, twice or out of order; a receiver applies an event only when it is forward (see
// JobState for the order). Unknown states are never forward; anything is forward from the zero
// state.
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
	// DeliveryID identifies the delivery (GitHub: X-GitHub-Delivery; GitLab: X-Gitlab-Event-UUID;
	// Buildkite: the request ID); redeliveries reuse it where the platform redelivers.
	DeliveryID string
	// JobID identifies the job within Installation; dedupe on it together with State. GitHub
	// and GitLab: the numeric job ID in decimal; Buildkite: the job's UUID.
	JobID string
	// RunID groups jobs (GitHub: workflow run ID; GitLab: pipeline ID; Buildkite: build ID).
	RunID string
	State JobState
	// Labels are what the job asks of a runner, lower-cased: GitHub's runs-on labels, GitLab's
	// tags, Buildkite's agent query rules as key=value (its queue as queue=<key>, "default" when
	// the job names none).
	Labels []string
	// LabelsUnknown says the delivery does not carry the job's labels (GitLab: a Job Hook has no
	// job tags), so Labels says nothing yet: a receiver reads the job (DemandSource.GetJob) through
	// a pool that may serve it before routing it by its labels.
	LabelsUnknown bool
	// Repository is where the job's code lives: GitHub "owner/name", GitLab the project's full
	// path "group/sub/project", Buildkite "org/pipeline". Organization is the account: GitHub's
	// organization (empty for repositories owned by a user), GitLab's top-level group, Buildkite's
	// organization slug.
	Repository   string
	Organization string
	// Installation is the account the event proves it came from, and the key job claims are
	// kept under (see Source.Installation). GitHub: the App installation ID in decimal; GitLab:
	// the instance's host; Buildkite: the organization slug.
	Installation string
	// RunnerID and RunnerName name the runner once one took the job (in_progress, completed).
	RunnerID   string
	RunnerName string
	// URL is the job's page on its platform, when the delivery gives it (GitHub's html_url,
	// GitLab's project URL and the job's ID, Buildkite's web_url); for the job's record.
	URL string
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
	ID         string
	RunID      string
	Name       string
	State      JobState
	Labels     []string // lower-cased
	Repository string   // as JobEvent.Repository
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
