package proxmox

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestVMIDsNeverReachAnotherPath: VM IDs are opaque strings outside this package and come from
// object status and spec. One that is not a VMID in decimal (another provider's GUID, or text
// crafted to walk to another API path) must not become part of a request path.
func TestVMIDsNeverReachAnotherPath(t *testing.T) {
	for _, tc := range []struct {
		id, want string
	}{
		{"105", "/nodes/pve1/qemu/105/config"},
		{"999999999", "/nodes/pve1/qemu/999999999/config"},
		{"", "/nodes/pve1/qemu/0/config"},
		{"0105", "/nodes/pve1/qemu/0/config"},
		{"+105", "/nodes/pve1/qemu/0/config"},
		{"-1", "/nodes/pve1/qemu/0/config"},
		{"105/../../../access/users", "/nodes/pve1/qemu/0/config"},
		{"105?purge=1", "/nodes/pve1/qemu/0/config"},
		{"..", "/nodes/pve1/qemu/0/config"},
		{"5f0c2a8e-9b1d-4c3e-8f7a-2d6e1b0c9a47", "/nodes/pve1/qemu/0/config"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(vmPath(hypervisor.VMRef{Node: "pve1", ID: tc.id}, "/config")).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(vmPath(hypervisor.VMRef{Node: "pve1/../../access", ID: "105"}, "")).To(Equal("/nodes/pve1%2F..%2F..%2Faccess/qemu/105"),
		"a node name cannot walk out of /nodes either")
}

// TestCloneRefusesIDsThatAreNotVMIDs: a clone target or source that is not a VMID is refused
// before any request, with ErrInvalid.
func TestCloneRefusesIDsThatAreNotVMIDs(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	before := len(sim.VMs())
	p := newTestProvider(t, sim, clusterA)
	for _, spec := range []hypervisor.CloneSpec{
		{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}, Target: hypervisor.VMRef{Node: "pve1", ID: "1e3"}},
		{Source: hypervisor.VMRef{Node: "pve1", ID: "9000/../100"}, Target: hypervisor.VMRef{Node: "pve1", ID: "901"}},
		{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}},
	} {
		_, _, err := p.Clone(testCtx(t), spec)
		g.Expect(err).To(MatchError(hypervisor.ErrInvalid), "%+v", spec)
	}
	g.Expect(sim.VMs()).To(HaveLen(before), "nothing was cloned")
}

// TestNextIDProposesFromTheLastListing: after the sweep's listing of the cluster's VMs, NextID
// proposes VMIDs without another call, never the same one twice. A VMID another installation took
// after the listing may still be proposed; the clone onto it is refused by PVE and that VM is left
// as it was, and the next listing shows it taken.
func TestNextIDProposesFromTheLastListing(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	_, err := p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	sim.ResetRequests()
	a, err := p.NextID(ctx, 500)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := p.NextID(ctx, 500)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(BeEmpty(), "proposed from the sweep's listing")
	g.Expect([]int{a, b}).To(Equal([]int{500, 501}), "a proposal is not made twice")

	other := newTestProvider(t, sim, "fleet/pve-b")
	cloneOwned(t, other, 502, ownerFor("fleet/pve-b", "theirs"))
	theirs := simVM(t, sim, 502)
	stale, err := p.NextID(ctx, 502)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stale).To(Equal(502), "the listing is older than their clone")
	_, _, err = p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)},
		Target: hypervisor.VMRef{Node: "pve1", ID: idOf(stale)}, Name: "ours", Owner: ownerFor(clusterA, "ours")})
	g.Expect(err).To(MatchError(hypervisor.ErrAlreadyExists))
	g.Expect(simVM(t, sim, 502)).To(Equal(theirs), "their VM is left as it was")

	_, err = p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	fresh, err := p.NextID(ctx, 502)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fresh).To(Equal(503), "the next listing shows 502 taken")
}

// TestAProposalOutlivesTheNextListing: a claim keeps its proposed VMID while it waits its turn to
// clone, and a sweep listing made meanwhile (which cannot show the VMID taken) must not hand the
// same VMID to the next claim: the later clone would collide with the earlier one's VM.
func TestAProposalOutlivesTheNextListing(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	_, err := p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	waiting, err := p.NextID(ctx, 600)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.OwnedVMs(ctx) // the sweep lists the cluster while the claim waits to clone
	g.Expect(err).NotTo(HaveOccurred())
	next, err := p.NextID(ctx, 600)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next).NotTo(Equal(waiting), "the waiting claim's VMID is not proposed again")

	// Once a listing shows the VMID taken, the proposal is no longer needed to keep it.
	cloneOwned(t, p, waiting, ownerFor(clusterA, "waiting"))
	_, err = p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	p.vmids.mu.Lock()
	_, kept := p.vmids.proposed[waiting]
	p.vmids.mu.Unlock()
	g.Expect(kept).To(BeFalse(), "a listed VMID is not remembered as a proposal")
	g.Expect(p.NextID(ctx, waiting)).NotTo(Equal(waiting))
}
