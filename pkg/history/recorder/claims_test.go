package recorder_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/machineclaim"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/history/recorder"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var _ machineclaim.History = recorder.Claims{}

// A runner's VM moments become its runner facts (joined to the job it took) and audit entries
// with reasons; a VM of a VMPool gets audit entries, its power changes included.
func TestClaimMomentsBecomeRunnerFactsAndAuditEntries(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	r := start(t, store, recorder.Options{})
	h := recorder.Claims{Recorder: r, Actor: "hyperfleet-manager"}
	hc := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Name: "pve"}}
	hc.Spec.Provider = "Proxmox"
	runner := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "linux-x7",
		Labels: map[string]string{fleetv1.RunnerPoolNameLabel: "linux"}, CreationTimestamp: metav1.NewTime(t0)}}
	runner.Status.VMID, runner.Status.Node = "4101", "node1"
	vm := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db",
		Labels: map[string]string{fleetv1.VMPoolNameLabel: "dbs"}}}
	vm.Status.VMID, vm.Status.Node = "4102", "node2"
	config := &bootstrapv1.BootstrapConfig{}
	config.Status.SPIFFEID = "spiffe://fleet/ns/team-a/machine/linux-x7"
	config.Status.AttestedTime = &metav1.Time{Time: t0.Add(time.Minute)}
	config.Status.AttestedSVID = &bootstrapv1.AttestedSVID{SerialNumber: "0a", SHA256: "ab"}
	config.Status.AttestedTPM = &bootstrapv1.AttestedTPM{EKSHA256: "e1"}

	tmpl := hypervisor.Template{Name: "ubuntu", Ref: hypervisor.VMRef{Node: "node1", ID: "9000"}, Digest: "sha1:5e"}
	h.VMCloning(runner, hc, tmpl)
	h.VMCloned(runner, hc)
	h.VMRunning(runner, hc)
	h.VMAttested(runner, config)
	h.VMCloning(vm, hc, tmpl)
	h.VMChanged(vm, "stop-vm", "runStrategy Halted")
	r.Job(history.JobRecord{Platform: "github", JobID: "7", Namespace: "team-a", Runner: "linux-x7"})
	h.VMDestroyed(runner, hc, "VM 4101 is gone")
	g.Eventually(func() int { return r.Health().Pending }).Should(BeZero())

	rec, err := store.Job(context.Background(), "github/7")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.VM).To(Equal(history.VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: "4101", Name: "linux-x7"}))
	g.Expect(rec.Template).To(Equal(history.TemplateRef{Name: "ubuntu", ID: "9000", Digest: "sha1:5e"}))
	g.Expect(rec.Identity).To(Equal(history.Identity{SPIFFEID: config.Status.SPIFFEID, SVIDSerial: "0a", SVIDFingerprint: "sha256:ab", TPMEKHash: "sha256:e1"}))
	g.Expect(*rec.Times.VMRequested).To(Equal(t0))
	g.Expect(*rec.Times.Attested).To(Equal(t0.Add(time.Minute)))
	for _, tm := range []*time.Time{rec.Times.Cloned, rec.Times.Booted, rec.Times.VMDestroyed} {
		g.Expect(tm).NotTo(BeNil())
	}

	entries, err := store.Audit(context.Background(), history.AuditQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	type row struct{ name, action, reason string }
	var rows []row
	for _, e := range entries {
		g.Expect(e.Actor).To(Equal(history.Actor{Subject: "hyperfleet-manager", Kind: history.ActorController}))
		rows = append(rows, row{e.Object.Name, e.Action, e.Reason})
	}
	g.Expect(rows).To(ConsistOf(
		row{"linux-x7", "create-vm", "runner of RunnerPool linux"},
		row{"db", "create-vm", "replica of VMPool dbs"},
		row{"db", "stop-vm", "runStrategy Halted"},
		row{"linux-x7", "destroy-vm", "MachineClaim deleted"},
	))
}
