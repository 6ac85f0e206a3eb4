package recorder

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// logJob writes a sealed record as one structured log line, with OpenTelemetry's attribute names
// where it has them, for teams that ship logs rather than query the store.
func logJob(log logr.Logger, rec history.JobRecord, keyID string) {
	kv := []any{"log.record.kind", "job", "hyperfleet.job.id", rec.ID, "cicd.platform", rec.Platform,
		"cicd.pipeline.task.run.id", rec.JobID, "vcs.repository.name", rec.Repository,
		"k8s.namespace.name", rec.Namespace, "hyperfleet.pool", rec.Pool, "cicd.worker.name", rec.Runner,
		"hyperfleet.vm.provider", rec.VM.Provider, "hyperfleet.hypervisor_cluster", rec.VM.HypervisorCluster,
		"host.name", rec.VM.Host, "hyperfleet.vm.id", rec.VM.VMID, "hyperfleet.template.id", rec.Template.ID,
		"spiffe.id", rec.Identity.SPIFFEID, "hyperfleet.job.outcome", string(rec.Outcome),
		"hyperfleet.provenance.key_id", keyID}
	if rec.FailureReason != "" {
		kv = append(kv, "error.message", rec.FailureReason)
	}
	names := []string{"queued", "vm_requested", "cloned", "booted", "attested", "job_started", "job_finished", "vm_destroyed"}
	t := rec.Times
	for i, v := range []*time.Time{t.Queued, t.VMRequested, t.Cloned, t.Booted, t.Attested, t.JobStarted, t.JobFinished, t.VMDestroyed} {
		if v != nil {
			kv = append(kv, "hyperfleet.time."+names[i], v.UTC().Format(time.RFC3339Nano))
		}
	}
	log.Info("job record sealed", kv...)
}

// logAudit writes an audit entry as one structured log line.
func logAudit(log logr.Logger, e history.AuditEntry) {
	log.Info("audit", "log.record.kind", "audit", "hyperfleet.audit.id", e.ID, "enduser.id", e.Actor.Subject,
		"hyperfleet.actor.kind", string(e.Actor.Kind), "hyperfleet.audit.action", e.Action,
		"k8s.namespace.name", e.Object.Namespace, "hyperfleet.object.kind", e.Object.Kind, "hyperfleet.object.name", e.Object.Name,
		"hyperfleet.audit.result", e.Result, "hyperfleet.audit.reason", e.Reason, "hyperfleet.audit.time", e.Time.UTC().Format(time.RFC3339Nano))
}
