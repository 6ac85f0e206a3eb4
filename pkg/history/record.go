package history

import (
	"time"
)

// Outcome is how a job ended. The zero value means the outcome is not known yet.
type Outcome string

// The outcomes a job record may carry.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeUnknown: the job ended but nobody could tell how, for example because its VM was
	// destroyed before the runner reported.
	OutcomeUnknown Outcome = "unknown"
)

// JobRecord is what HyperFleet knows about one CI job and the VM that ran it. Recorders write it
// piece by piece as they learn it (see Store.UpsertJob); a zero field means "not known yet".
type JobRecord struct {
	// ID is "<platform>/<job id>", unique across platforms. UpsertJob derives it from Platform and
	// JobID when it is empty.
	ID        string `json:"id"`
	Namespace string `json:"namespace,omitempty"`
	// Pool is the name of the RunnerPool whose runner took the job.
	Pool string `json:"pool,omitempty"`
	// Platform is the CI platform: github, gitlab or buildkite.
	Platform string `json:"platform,omitempty"`
	// JobID is the job's ID on its platform.
	JobID  string `json:"jobID,omitempty"`
	JobURL string `json:"jobURL,omitempty"`
	// Repository is the repository (GitHub) or project (GitLab, Buildkite pipeline) of the job.
	Repository string   `json:"repository,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	// Runner is the name the runner registered with on the platform.
	Runner   string      `json:"runner,omitempty"`
	VM       VMRef       `json:"vm"`
	Template TemplateRef `json:"template"`
	Identity Identity    `json:"identity"`
	Times    JobTimes    `json:"times"`
	Outcome  Outcome     `json:"outcome,omitempty"`
	// FailureReason says why the job or its VM failed, when Outcome is not succeeded.
	FailureReason string `json:"failureReason,omitempty"`
	// Envelope is the signed DSSE envelope of the finished record. Once set, the record is sealed
	// and never changes again.
	Envelope []byte `json:"envelope,omitempty"`
	// UpdatedAt is when the store last wrote the record; the store sets it.
	UpdatedAt time.Time `json:"updatedAt"`
}

// VMRef names the VM that ran the job.
type VMRef struct {
	// Provider is the hypervisor provider: proxmox, hyperv or vsphere.
	Provider          string `json:"provider,omitempty"`
	HypervisorCluster string `json:"hypervisorCluster,omitempty"`
	Host              string `json:"host,omitempty"`
	VMID              string `json:"vmid,omitempty"`
	// Name is the name of the MachineClaim the VM was made for.
	Name string `json:"name,omitempty"`
}

// TemplateRef names the template the VM was cloned from.
type TemplateRef struct {
	Name   string `json:"name,omitempty"`
	ID     string `json:"id,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// Identity is the workload identity the VM proved before it got the job.
type Identity struct {
	SPIFFEID        string `json:"spiffeID,omitempty"`
	SVIDSerial      string `json:"svidSerial,omitempty"`
	SVIDFingerprint string `json:"svidFingerprint,omitempty"`
	// TPMEKHash is the hash of the VM's TPM endorsement key.
	TPMEKHash string `json:"tpmEKHash,omitempty"`
}

// JobTimes are the moments of a job's life, in UTC, nil when not known. The store keeps them to
// the microsecond.
type JobTimes struct {
	Queued      *time.Time `json:"queued,omitempty"`
	VMRequested *time.Time `json:"vmRequested,omitempty"`
	Cloned      *time.Time `json:"cloned,omitempty"`
	Booted      *time.Time `json:"booted,omitempty"`
	Attested    *time.Time `json:"attested,omitempty"`
	JobStarted  *time.Time `json:"jobStarted,omitempty"`
	JobFinished *time.Time `json:"jobFinished,omitempty"`
	VMDestroyed *time.Time `json:"vmDestroyed,omitempty"`
}

// all lists pointers to every time, in the order of a job's life.
func (t *JobTimes) all() []**time.Time {
	return []**time.Time{&t.Queued, &t.VMRequested, &t.Cloned, &t.Booted, &t.Attested, &t.JobStarted, &t.JobFinished, &t.VMDestroyed}
}

// SortTime is the time a record is listed, filtered and paged by: Queued, or else the earliest time
// known, or else the zero time (such a record sorts as the oldest).
func (t JobTimes) SortTime() time.Time {
	if t.Queued != nil {
		return *t.Queued
	}
	var first time.Time
	for _, p := range t.all() {
		if *p != nil && (first.IsZero() || (*p).Before(first)) {
			first = **p
		}
	}
	return first
}

// Sealed reports whether the record carries its signed envelope and so may not change.
func (r JobRecord) Sealed() bool { return len(r.Envelope) > 0 }

// ActorKind tells a person from a controller.
type ActorKind string

// The kinds of actor.
const (
	ActorPerson     ActorKind = "person"
	ActorController ActorKind = "controller"
)

// MaxAuditDetail is the longest Detail an audit entry keeps; AppendAudit cuts a longer one.
const MaxAuditDetail = 2048

// AuditEntry is one action taken on one object. Entries are never changed once appended.
type AuditEntry struct {
	// ID is the entry's place in the log, assigned by AppendAudit; later entries have larger IDs.
	ID     int64     `json:"id"`
	Time   time.Time `json:"time"`
	Actor  Actor     `json:"actor"`
	Action string    `json:"action"`
	Object ObjectRef `json:"object"`
	// Result is "ok", or the error the action ended with.
	Result string `json:"result"`
	// Reason says why a controller acted.
	Reason string `json:"reason,omitempty"`
	// Detail is free text of at most MaxAuditDetail bytes.
	Detail string `json:"detail,omitempty"`
}

// Actor is who acted: a person from the console or API, or a controller.
type Actor struct {
	Subject string    `json:"subject"`
	Groups  []string  `json:"groups,omitempty"`
	Kind    ActorKind `json:"kind"`
}

// ObjectRef names the Kubernetes object acted on; Namespace is empty for a cluster-scoped one.
type ObjectRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// ResultOK is the Result of an action that succeeded.
const ResultOK = "ok"
