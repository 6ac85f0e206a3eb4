package proxmox

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestConfigureSaysWhenTheCloneIsOver: Configure calls spec.Proven once its read shows the VM
// ours and free of the clone's lock, before the ISO is uploaded or anything written, so a caller
// can give the clone's storage slot to the next clone without waiting for the rest; while the
// clone still holds the VM, Configure answers ErrBusy and does not call it.
func TestConfigureSaysWhenTheCloneIsOver(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{TaskDuration: 500 * time.Millisecond})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := hypervisor.VMRef{Node: "pve1", ID: idOf(430)}
	_, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}, Target: ref,
		Name: "proven", Owner: ownerFor(clusterA, "proven")})
	g.Expect(err).NotTo(HaveOccurred())

	proven, uploadsWhenProven := 0, -1
	spec := hypervisor.ConfigSpec{Cores: 2, CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: i-430\n"},
		Proven: func() {
			proven++
			uploadsWhenProven = sim.Requests()["POST /nodes/{node}/storage/{storage}/upload"]
		}}
	_, err = p.Configure(ctx, ref, spec)
	g.Expect(errors.Is(err, hypervisor.ErrBusy)).To(BeTrue(), "the clone still runs: %v", err)
	g.Expect(proven).To(BeZero(), "not proven while the clone holds the VM")

	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	sim.ResetRequests()
	_, err = p.Configure(ctx, ref, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(proven).To(Equal(1))
	g.Expect(uploadsWhenProven).To(BeZero(), "proven before the ISO upload")
	g.Expect(sim.Requests()["POST /nodes/{node}/storage/{storage}/upload"]).To(Equal(1))
}
