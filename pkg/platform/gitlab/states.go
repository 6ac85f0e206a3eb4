package gitlab

// Phase is what a GitLab job status means to HyperFleet's job ledger.
type Phase string

// Phases of a job. Only PhaseDemand asks for a VM.
const (
	// PhaseDemand: the job is offered to runners now (pending).
	PhaseDemand Phase = "demand"
	// PhaseHeld: the job exists but GitLab does not offer it to runners yet, maybe for hours.
	// Booting a VM for it would idle; when GitLab releases it, it becomes pending (forward).
	PhaseHeld Phase = "held"
	// PhaseInProgress: a runner has the job.
	PhaseInProgress Phase = "in_progress"
	// PhaseCompleted: the job will never run (again).
	PhaseCompleted Phase = "completed"
)

// phases maps every job status GitLab documents (API jobs "status", Job Hook "build_status")
// to a phase. Each is listed on purpose: an unknown status maps to nothing and is not acted on.
var phases = map[string]Phase{
	"pending": PhaseDemand,

	// created: waiting for an earlier stage or a needs: dependency.
	"created": PhaseHeld,
	// waiting_for_resource: waiting for its resource_group, which another job holds.
	"waiting_for_resource": PhaseHeld,
	// preparing: GitLab runs the job's prerequisites (e.g. an environment's deployment) before
	// it becomes pending; no runner has it and none is asked for yet.
	"preparing": PhaseHeld,
	// manual: waits for a person to play it, possibly forever.
	"manual": PhaseHeld,
	// scheduled: a delayed job (when: delayed) waiting for its start_in.
	"scheduled": PhaseHeld,

	"running": PhaseInProgress,
	// canceling: the runner is still busy winding the job down.
	"canceling": PhaseInProgress,

	"success":  PhaseCompleted,
	"failed":   PhaseCompleted,
	"canceled": PhaseCompleted,
	"skipped":  PhaseCompleted,
}

// PhaseOf returns the phase of a GitLab job status; ok is false for a status GitLab has not
// documented.
func PhaseOf(status string) (phase Phase, ok bool) {
	phase, ok = phases[status]
	return phase, ok
}

// listedStatuses are the statuses the repair loop lists: every status a job can still need
// (or hold) a runner in, and running, which tells the loop which jobs have one.
var listedStatuses = []string{"pending", "running", "created", "waiting_for_resource", "preparing", "manual", "scheduled"}
