package recorder

import (
	"fmt"
	"strings"
	"time"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Claims turns the MachineClaim controller's VM lifecycle moments into runner facts for the job
// records of runner pools and into audit entries for every VM HyperFleet creates or destroys (the
// controller's History).
type Claims struct {
	Recorder *Recorder
	// Actor names the manager in audit entries, e.g. its ServiceAccount's username.
	Actor string
}

func (h Claims) now() *time.Time {
	t := h.Recorder.opts.Now()
	return &t
}

// runner returns the claim's runner name when it is a runner pool's (runners are named like their
// claims), else "".
func runner(c *infrav1.MachineClaim) string {
	if c.Labels[fleetv1.RunnerPoolNameLabel] == "" {
		return ""
	}
	return c.Name
}

func vmRef(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster) history.VMRef {
	ref := history.VMRef{Host: c.Status.Node, VMID: c.Status.VMID, Name: c.Name}
	if hc != nil {
		ref.Provider, ref.HypervisorCluster = strings.ToLower(string(hc.Spec.Provider)), hc.Name
	}
	return ref
}

func (h Claims) facts(c *infrav1.MachineClaim, rec history.JobRecord) {
	if name := runner(c); name != "" {
		h.Recorder.Runner(c.Namespace, name, rec)
	}
}

func (h Claims) audit(c *infrav1.MachineClaim, action, reason, detail string) {
	h.Recorder.Audit(history.AuditEntry{
		Actor:  history.Actor{Subject: h.Actor, Kind: history.ActorController},
		Action: action,
		Object: history.ObjectRef{APIVersion: infrav1.GroupVersion.String(), Kind: "MachineClaim", Namespace: c.Namespace, Name: c.Name},
		Result: history.ResultOK, Reason: reason, Detail: detail,
	})
}

// why says for whom HyperFleet made a VM.
func why(c *infrav1.MachineClaim) string {
	switch {
	case c.Labels[fleetv1.RunnerPoolNameLabel] != "":
		return "runner of RunnerPool " + c.Labels[fleetv1.RunnerPoolNameLabel]
	case c.Labels[fleetv1.VMPoolNameLabel] != "":
		return "replica of VMPool " + c.Labels[fleetv1.VMPoolNameLabel]
	}
	return "MachineClaim created"
}

// VMCloning records the clone's request: the VM, its template and when the claim asked for it.
func (h Claims) VMCloning(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster, t hypervisor.Template) {
	requested := c.CreationTimestamp.UTC()
	h.facts(c, history.JobRecord{VM: vmRef(c, hc), Template: history.TemplateRef{Name: t.Name, ID: t.Ref.ID, Digest: t.Digest},
		Times: history.JobTimes{VMRequested: &requested}})
	h.audit(c, "create-vm", why(c), fmt.Sprintf("cloning template %s (%s) to VM %s on %s", t.Name, t.Ref.ID, c.Status.VMID, c.Status.Node))
}

// VMCloned records when the clone finished.
func (h Claims) VMCloned(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster) {
	h.facts(c, history.JobRecord{VM: vmRef(c, hc), Times: history.JobTimes{Cloned: h.now()}})
}

// VMRunning records when the VM was started.
func (h Claims) VMRunning(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster) {
	h.facts(c, history.JobRecord{VM: vmRef(c, hc), Times: history.JobTimes{Booted: h.now()}})
}

// VMAttested records the identity the VM proved and when.
func (h Claims) VMAttested(c *infrav1.MachineClaim, config *bootstrapv1.BootstrapConfig) {
	rec := history.JobRecord{Identity: history.Identity{SPIFFEID: config.Status.SPIFFEID}}
	if at := config.Status.AttestedTime; at != nil {
		t := at.UTC()
		rec.Times.Attested = &t
	}
	if svid := config.Status.AttestedSVID; svid != nil {
		rec.Identity.SVIDSerial, rec.Identity.SVIDFingerprint = svid.SerialNumber, "sha256:"+svid.SHA256
	}
	if tpm := config.Status.AttestedTPM; tpm != nil {
		rec.Identity.TPMEKHash = "sha256:" + tpm.EKSHA256
	}
	h.facts(c, rec)
}

// VMDestroyed records that the VM is gone, and why.
func (h Claims) VMDestroyed(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster, reason string) {
	h.facts(c, history.JobRecord{VM: vmRef(c, hc), Times: history.JobTimes{VMDestroyed: h.now()}})
	detail := reason
	if c.DeletionTimestamp != nil {
		detail = fmt.Sprintf("%s; MachineClaim deleted at %s", reason, c.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	h.audit(c, "destroy-vm", "MachineClaim deleted", detail)
}

// VMChanged records a change the controller made to a VM that exists, with its reason.
func (h Claims) VMChanged(c *infrav1.MachineClaim, action, reason string) {
	h.audit(c, action, reason, fmt.Sprintf("VM %s on %s", c.Status.VMID, c.Status.Node))
}
