package buildkite

// Phase is what a Buildkite job state means to HyperFleet's job ledger.
type Phase string

// Phases of a job. Only PhaseDemand asks for a VM.
const (
	// PhaseDemand: the job is scheduled and waits for an agent of its queue now.
	PhaseDemand Phase = "demand"
	// PhaseHeld: the job exists but is not offered to agents yet (behind a wait or block step,
	// a concurrency group or a platform limit). Booting a VM for it would idle, maybe for hours.
	PhaseHeld Phase = "held"
	// PhaseInProgress: an agent has the job (assigned, accepted, running, or winding down).
	PhaseInProgress Phase = "in_progress"
	// PhaseCompleted: the job will never run (again): finished, canceled, expired, skipped...
	PhaseCompleted Phase = "completed"
)

// phases maps every job state Buildkite documents (REST "state", GraphQL JobStates) to a phase.
// Each state is listed on purpose: an unknown state maps to nothing and is not acted on.
var phases = map[string]Phase{
	"scheduled": PhaseDemand,

	"pending":           PhaseHeld, // just created, not yet evaluated
	"waiting":           PhaseHeld, // behind a wait step
	"blocked":           PhaseHeld, // behind a block step
	"limiting":          PhaseHeld, // concurrency group check
	"limited":           PhaseHeld, // waiting for its concurrency group
	"platform_limiting": PhaseHeld,
	"platform_limited":  PhaseHeld,

	"assigned":   PhaseInProgress, // given to an agent, not yet accepted
	"accepted":   PhaseInProgress,
	"running":    PhaseInProgress,
	"canceling":  PhaseInProgress, // the agent is still busy with it
	"timing_out": PhaseInProgress,

	"finished":         PhaseCompleted,
	"canceled":         PhaseCompleted,
	"timed_out":        PhaseCompleted,
	"skipped":          PhaseCompleted,
	"broken":           PhaseCompleted,
	"expired":          PhaseCompleted, // never picked up in time
	"waiting_failed":   PhaseCompleted, // the build failed while the job waited: it never runs
	"blocked_failed":   PhaseCompleted,
	"unblocked":        PhaseCompleted, // a block step, not an agent's job
	"unblocked_failed": PhaseCompleted,
}

// PhaseOf returns the phase of a Buildkite job state; ok is false for a state Buildkite has
// not documented.
func PhaseOf(state string) (phase Phase, ok bool) {
	phase, ok = phases[state]
	return phase, ok
}

// NeedsAgent reports whether a job of this type ever runs on an agent: only command steps
// ("script") do; block ("manual"), wait ("waiter") and trigger jobs never do.
func NeedsAgent(jobType string) bool { return jobType == "script" }
