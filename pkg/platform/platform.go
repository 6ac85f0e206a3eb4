package platform

import (
	"context"
	"net/http"
)

// Kind names a CI platform.
type Kind string

// KindGitHub is GitHub Actions (github.com or GitHub Enterprise Server).
const KindGitHub Kind = "github"

// Platform is everything HyperFleet needs from a CI platform.
type Platform interface {
	Kind() Kind
	WebhookParser
	DemandSource
	RunnerRegistry
}

// WebhookParser authenticates and parses one webhook delivery. It returns ErrInvalidSignature
// (answer 401) or ErrMalformedWebhook (answer 400) for deliveries to reject; events that are
// not about jobs come back as WebhookIgnored or WebhookPing, never as errors.
type WebhookParser interface {
	ParseWebhook(header http.Header, body, secret []byte) (Webhook, error)
}

// DemandSource answers "which jobs wait for a runner?" from the platform's API. Webhooks are
// not retried by GitHub, so a repair loop compares this with what webhooks told it.
type DemandSource interface {
	// QueuedJobs lists the jobs in scope waiting for a runner (queued or waiting). Callers pick
	// the ones a pool can serve with FilterJobs.
	QueuedJobs(ctx context.Context, scope Scope) ([]Job, error)
	// GetJob reads one job, e.g. to check whether a job a webhook announced still waits.
	// GitHub needs a repository scope for it.
	GetJob(ctx context.Context, scope Scope, jobID int64) (Job, error)
}

// RunnerRegistry registers, lists and removes runners in a scope.
type RunnerRegistry interface {
	// JITConfig registers a runner named spec.Name and returns the opaque one-time config the
	// runner starts with (GitHub: run.sh --jitconfig) and the runner's ID (0 where a platform
	// has none before the runner connects). Names are deterministic, so a leftover runner of the
	// same name is ours: implementations delete it and retry once. Callers must therefore not
	// register one name from two places at once (one registration per Machine, recorded in the
	// API server), or one would delete the other's fresh runner.
	JITConfig(ctx context.Context, scope Scope, spec RunnerSpec) (encodedJITConfig string, runnerID int64, err error)
	// ListRunners lists every runner registered in scope.
	ListRunners(ctx context.Context, scope Scope) ([]Runner, error)
	// RemoveRunner deregisters a runner; a runner already gone is not an error. A runner busy
	// with a job yields ErrRunnerBusy.
	RemoveRunner(ctx context.Context, scope Scope, runnerID int64) error
	// RemoveRunnerByName deregisters the runner with a (deterministic) name, when its ID was
	// never recorded; no such runner is not an error.
	RemoveRunnerByName(ctx context.Context, scope Scope, name string) error
}

// RunnerSpec describes a runner to register.
type RunnerSpec struct {
	// Name is unique in the scope and deterministic (derived from the Machine), so a retry
	// after a crash finds the runner it registered before.
	Name string
	// Labels are the labels jobs select the runner by. Implementations add what the platform
	// needs implicitly (GitHub: self-hosted).
	Labels []string
	// RunnerGroupID is the GitHub runner group; 0 means the default group (1).
	RunnerGroupID int64
	// WorkFolder is the runner's work directory relative to its install; empty means "_work".
	WorkFolder string
}

// RunnerStatus is whether a runner is connected to the platform.
type RunnerStatus string

// Runner statuses.
const (
	RunnerOnline  RunnerStatus = "online"
	RunnerOffline RunnerStatus = "offline"
)

// Runner is a runner registered with the platform.
type Runner struct {
	ID     int64
	Name   string
	Labels []string // lower-cased
	Status RunnerStatus
	Busy   bool
}
