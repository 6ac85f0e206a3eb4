package instrumented

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestAgainstTheProxmoxSimulator clones a VM through the real Proxmox provider and checks the spans,
// the metrics and the error classes the decorator passes on.
func TestAgainstTheProxmoxSimulator(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	resetMetrics()
	sim := pvesim.StartForTest(t, pvesim.Config{TaskDuration: 20 * time.Millisecond, BootDelay: 10 * time.Millisecond})
	pve, err := proxmox.New(proxmox.Config{
		Endpoint: sim.URL(), TokenID: pvesim.TestTokenID, TokenSecret: pvesim.TestTokenSecret,
		CABundle: sim.CACertPEM(), Cluster: cluster, InstallationID: "0123456789abcdef", Timeout: 5 * time.Second,
	})
	g.Expect(err).NotTo(HaveOccurred())
	p := Wrap(pve, metrics.ProviderProxmox, cluster)
	t.Cleanup(p.(interface{ Close() }).Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Tags: []string{"runner"}})
	g.Expect(err).NotTo(HaveOccurred())
	id, err := p.NextID(ctx, 0)
	g.Expect(err).NotTo(HaveOccurred())
	target := hypervisor.VMRef{Node: "pve1", ID: idOf(id)}
	owner := hypervisor.Ownership{Cluster: cluster, ClaimNamespace: "runners", ClaimName: "linux-x64-abcde", ClaimID: "id-1"}
	_, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: target, Name: "linux-x64-abcde", Owner: owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (bool, error) {
		st, err := p.TaskStatus(ctx, "", task)
		return st.Done && st.Err == nil, err
	}).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())

	_, _, err = p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: target, Name: "linux-x64-fghij", Owner: owner})
	g.Expect(errors.Is(err, hypervisor.ErrAlreadyExists)).To(BeTrue(), "the VMID is taken: %v", err)
	_, err = p.VM(ctx, hypervisor.VMRef{Node: "pve1", ID: idOf(999_999)})
	g.Expect(errors.Is(err, hypervisor.ErrNotFound)).To(BeTrue(), "%v", err)

	clones := spansNamed(sr, "hypervisor.Clone")
	g.Expect(clones).To(HaveLen(2))
	attrs := attrsOf(clones[0])
	g.Expect(attrs).To(HaveKeyWithValue(AttrCluster, attribute.StringValue(cluster)))
	g.Expect(attrs).To(HaveKeyWithValue(AttrVMNode, attribute.StringValue("pve1")))
	g.Expect(attrs).To(HaveKeyWithValue(AttrVMID, attribute.StringValue(idOf(id))))
	g.Expect(attrs).To(HaveKeyWithValue(AttrTemplateID, attribute.StringValue(tmpl.Ref.ID)))
	g.Expect(attrs).To(HaveKeyWithValue(AttrTaskID, attribute.StringValue(string(task))))
	g.Expect(clones[1].Status().Code).To(Equal(codes.Error))
	g.Expect(attrsOf(clones[1])).To(HaveKeyWithValue(AttrErrorType, attribute.StringValue("AlreadyExists")))
	lastPoll := spansNamed(sr, "hypervisor.TaskStatus")
	g.Expect(attrsOf(lastPoll[len(lastPoll)-1])).To(HaveKeyWithValue(AttrTaskDone, attribute.BoolValue(true)))
	g.Expect(spansNamed(sr, "hypervisor.ResolveTemplate")).To(HaveLen(1))
	g.Expect(spansNamed(sr, "hypervisor.NextID")).To(HaveLen(1))

	g.Expect(observations(metrics.HypervisorAPIRequestDuration, metrics.ProviderProxmox, "Clone", "ok")).To(Equal(uint64(1)))
	g.Expect(observations(metrics.HypervisorAPIRequestDuration, metrics.ProviderProxmox, "Clone", "AlreadyExists")).To(Equal(uint64(1)))
	g.Expect(testutil.ToFloat64(metrics.HypervisorAPIErrors.WithLabelValues(metrics.ProviderProxmox, "Clone", "AlreadyExists"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.HypervisorAPIErrors.WithLabelValues(metrics.ProviderProxmox, "VM", "NotFound"))).To(Equal(1.0))
	g.Expect(observations(metrics.HypervisorTaskDuration, metrics.ProviderProxmox, "Clone")).To(Equal(uint64(1)))
}
