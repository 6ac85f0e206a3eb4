package history

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// merge lays what a recorder learned over the stored record: every non-zero field of update
// overwrites, every zero one keeps what was stored.
func merge(stored, update JobRecord) JobRecord {
	out := stored
	setString := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setString(&out.ID, update.ID)
	setString(&out.Namespace, update.Namespace)
	setString(&out.Pool, update.Pool)
	setString(&out.Platform, update.Platform)
	setString(&out.JobID, update.JobID)
	setString(&out.JobURL, update.JobURL)
	setString(&out.Repository, update.Repository)
	if len(update.Labels) > 0 {
		out.Labels = append([]string(nil), update.Labels...)
	}
	setString(&out.Runner, update.Runner)
	setString(&out.VM.Provider, update.VM.Provider)
	setString(&out.VM.HypervisorCluster, update.VM.HypervisorCluster)
	setString(&out.VM.Host, update.VM.Host)
	setString(&out.VM.VMID, update.VM.VMID)
	setString(&out.VM.Name, update.VM.Name)
	setString(&out.Template.Name, update.Template.Name)
	setString(&out.Template.ID, update.Template.ID)
	setString(&out.Template.Digest, update.Template.Digest)
	setString(&out.Identity.SPIFFEID, update.Identity.SPIFFEID)
	setString(&out.Identity.SVIDSerial, update.Identity.SVIDSerial)
	setString(&out.Identity.SVIDFingerprint, update.Identity.SVIDFingerprint)
	setString(&out.Identity.TPMEKHash, update.Identity.TPMEKHash)
	dst, src := out.Times.all(), update.Times.all()
	for i := range dst {
		if *src[i] != nil {
			*dst[i] = storedTime(*src[i])
		}
	}
	if update.Outcome != "" {
		out.Outcome = update.Outcome
	}
	setString(&out.FailureReason, update.FailureReason)
	if len(update.Envelope) > 0 {
		out.Envelope = append([]byte(nil), update.Envelope...)
	}
	return out
}

// runnerFacts keeps of r only what is learned about a runner's VM rather than its job.
func runnerFacts(r JobRecord) JobRecord {
	return JobRecord{VM: r.VM, Template: r.Template, Identity: r.Identity, Times: JobTimes{
		VMRequested: r.Times.VMRequested, Cloned: r.Times.Cloned, Booted: r.Times.Booted,
		Attested: r.Times.Attested, VMDestroyed: r.Times.VMDestroyed,
	}}
}

// storedTime is t as both databases keep it: UTC, to the microsecond.
func storedTime(t *time.Time) *time.Time {
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// prepareJob checks a record before it is merged and gives it its ID if it has none.
func prepareJob(r JobRecord) (JobRecord, error) {
	if r.ID == "" && r.Platform != "" && r.JobID != "" {
		r.ID = r.Platform + "/" + r.JobID
	}
	if r.ID == "" {
		return r, fmt.Errorf("%w: a job record needs an ID, or a Platform and JobID", ErrInvalid)
	}
	switch r.Outcome {
	case "", OutcomeSucceeded, OutcomeFailed, OutcomeCancelled, OutcomeUnknown:
	default:
		return r, fmt.Errorf("%w: job %s: outcome %q", ErrInvalid, r.ID, r.Outcome)
	}
	return r, nil
}

// prepareAudit checks an entry before it is appended, stamps it with now when it has no time, and
// cuts its Detail to MaxAuditDetail bytes on a character boundary.
func prepareAudit(e AuditEntry, now time.Time) (AuditEntry, error) {
	if e.Action == "" || e.Actor.Subject == "" {
		return e, fmt.Errorf("%w: an audit entry needs an action and an actor", ErrInvalid)
	}
	switch e.Actor.Kind {
	case ActorPerson, ActorController:
	default:
		return e, fmt.Errorf("%w: audit actor kind %q: want person or controller", ErrInvalid, e.Actor.Kind)
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Time = *storedTime(&e.Time)
	if len(e.Detail) > MaxAuditDetail {
		cut := MaxAuditDetail
		for cut > 0 && !utf8.RuneStart(e.Detail[cut]) {
			cut--
		}
		e.Detail = e.Detail[:cut]
	}
	e.ID = 0
	return e, nil
}
