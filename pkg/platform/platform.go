package platform

import (
	"context"
	"net/http"
	"slices"
)

// Kind names a CI platform; it is also the name of the RunnerPool's spec.platform member and of
// the receiver's route, /webhooks/<kind>.
type Kind string

// The CI platforms HyperFleet ships. Another platform is a package that registers its Driver
// (Register) under a kind of its own.
const (
	// KindGitHub is GitHub Actions (github.com or GitHub Enterprise Server).
	KindGitHub Kind = "github"
	// KindGitLab is GitLab CI (gitlab.com or a self-managed instance).
	KindGitLab Kind = "gitlab"
	// KindBuildkite is Buildkite (hosted control plane, self-hosted agents).
	KindBuildkite Kind = "buildkite"
)

// Kinds lists every known kind in a stable order: the kinds HyperFleet ships, then any other
// registered kind in the order it registered.
func Kinds() []Kind {
	out := []Kind{KindGitHub, KindGitLab, KindBuildkite}
	for _, k := range Registered() {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Valid reports whether k is a known kind: one HyperFleet ships, or a registered one.
func (k Kind) Valid() bool {
	switch k {
	case KindGitHub, KindGitLab, KindBuildkite:
		return true
	}
	_, ok := Lookup(k)
	return ok
}

// Platform is everything HyperFleet needs from a CI platform, for one pool.
type Platform interface {
	Kind() Kind
	WebhookParser
	DemandSource
	RunnerRegistry
}

// WebhookParser authenticates and parses one webhook delivery. It returns ErrInvalidSignature
// (answer 401) or ErrMalformedWebhook (answer 400) for deliveries to reject; events that are
// not about jobs come back as WebhookIgnored or WebhookPing, never as errors. secret is what the
// platform proves a delivery with (GitHub: the HMAC key of X-Hub-Signature-256; GitLab: the
// X-Gitlab-Token value; Buildkite: the X-Buildkite-Token value or signature key); an empty secret
// refuses every delivery.
type WebhookParser interface {
	ParseWebhook(header http.Header, body, secret []byte) (Webhook, error)
}

// DemandSource answers "which jobs wait for a runner?" from the platform's API. Webhooks are
// not retried by every platform, so a repair loop compares this with what webhooks told it.
type DemandSource interface {
	// QueuedJobs lists the jobs in scope that wait for a runner or are held (JobQueued or
	// JobWaiting); only JobQueued is demand (JobState.NeedsRunner). Callers pick the ones a pool
	// can serve with FilterJobs.
	QueuedJobs(ctx context.Context, scope Scope) ([]Job, error)
	// GetJob reads one job, e.g. to check whether a job a webhook announced still waits. GitHub
	// needs a repository scope for it; GitLab a project scope (Job.Repository says which).
	GetJob(ctx context.Context, scope Scope, jobID string) (Job, error)
}

// RunnerRegistry registers, lists and removes runners in a scope.
type RunnerRegistry interface {
	// Register registers a runner named spec.Name and returns its ID and the opaque one-time
	// config the VM starts it with (see Registration). Names are deterministic, so a leftover
	// runner of the same name is ours: implementations delete it and retry once. Callers must
	// therefore not register one name from two places at once (one registration per Machine,
	// recorded in the API server), or one would delete the other's fresh runner.
	Register(ctx context.Context, scope Scope, spec RunnerSpec) (Registration, error)
	// ListRunners lists every runner registered in scope.
	ListRunners(ctx context.Context, scope Scope) ([]Runner, error)
	// RemoveRunner deregisters a runner by the ID Register returned; a runner already gone is
	// not an error. A runner busy with a job yields ErrRunnerBusy.
	RemoveRunner(ctx context.Context, scope Scope, runnerID string) error
	// RemoveRunnerByName deregisters the runner with a (deterministic) name, when its ID was
	// never recorded; no such runner is not an error.
	RemoveRunnerByName(ctx context.Context, scope Scope, name string) error
}

// RunnerSpec describes a runner to register. Platform-specific settings (GitHub's runner group,
// GitLab's access level, Buildkite's queue) come from the pool's spec.platform, which the
// Source read when it built the Platform.
type RunnerSpec struct {
	// Name is unique in the scope and deterministic (derived from the Machine), so a retry
	// after a crash finds the runner it registered before.
	Name string
	// Labels are the labels (GitLab: tags; Buildkite: agent tags key=value) jobs select the
	// runner by. Implementations add what the platform needs implicitly (GitHub: self-hosted).
	Labels []string
	// WorkFolder is the runner's work directory relative to its install; empty means the
	// platform's default (GitHub: "_work").
	WorkFolder string
}

// Registration is a registered runner and what its VM needs to start it, exactly once.
type Registration struct {
	// ID identifies the runner on the platform for RemoveRunner ("" where a platform has none
	// before the runner connects). GitHub: the runner ID in decimal; GitLab: the runner ID in
	// decimal; Buildkite: the ID of the runner's agent token.
	ID string
	// Config is the opaque one-time secret handed to the VM by the bootstrap service, never
	// logged or stored in an object status. GitHub: the encoded JIT config for run.sh
	// --jitconfig; GitLab: JSON {"url", "token"} with the glrt- runner authentication token;
	// Buildkite: JSON {"endpoint", "token", "tags"} with the agent token.
	Config string
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
	ID     string
	Name   string
	Labels []string // lower-cased
	Status RunnerStatus
	Busy   bool
}
