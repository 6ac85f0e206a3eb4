package proxmox

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestResolveTemplatesOnePerNode resolves a runner template kept on several nodes: a name or tags
// selector finds one copy per node, two copies on one node are ambiguous, and a VMID selector
// still means exactly that template.
func TestResolveTemplatesOnePerNode(t *testing.T) {
	copies := func(extra ...pvesim.VMSpec) *pvesim.Inventory {
		inv := pvesim.DefaultInventory()
		inv.VMs = append(inv.VMs, pvesim.RunnerTemplate(9100, "pve3", "ubuntu-2404-runner", "40G", "runner", "template", "ubuntu"))
		inv.VMs = append(inv.VMs, extra...)
		return inv
	}
	ubuntu := hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Tags: []string{"runner"}}
	cases := []struct {
		name      string
		inventory *pvesim.Inventory
		sel       hypervisor.TemplateSelector
		want      []hypervisor.VMRef
		wantErr   error
		errText   string
	}{
		{name: "one copy per node, sorted by node", inventory: copies(), sel: ubuntu,
			want: []hypervisor.VMRef{{Node: "pve1", ID: "9000"}, {Node: "pve3", ID: "9100"}}},
		{name: "by tags alone", inventory: copies(), sel: hypervisor.TemplateSelector{Tags: []string{"ubuntu"}},
			want: []hypervisor.VMRef{{Node: "pve1", ID: "9000"}, {Node: "pve3", ID: "9100"}}},
		{name: "a pinned node narrows to its copy", inventory: copies(), sel: hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Node: "pve3"},
			want: []hypervisor.VMRef{{Node: "pve3", ID: "9100"}}},
		{name: "a VMID is exactly that template", inventory: copies(), sel: hypervisor.TemplateSelector{ID: "9100"},
			want: []hypervisor.VMRef{{Node: "pve3", ID: "9100"}}},
		{name: "a single template as before", inventory: pvesim.DefaultInventory(), sel: ubuntu,
			want: []hypervisor.VMRef{{Node: "pve1", ID: "9000"}}},
		{name: "two copies on one node are ambiguous",
			inventory: copies(pvesim.RunnerTemplate(9101, "pve3", "ubuntu-2404-runner", "32G", "runner")), sel: ubuntu,
			wantErr: hypervisor.ErrAmbiguous, errText: "2 templates match on node pve3: pve3/9100, pve3/9101"},
		{name: "nothing matches", inventory: copies(), sel: hypervisor.TemplateSelector{Name: "windows-2025"},
			wantErr: hypervisor.ErrNotFound, errText: "no template matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim := startSim(t, pvesim.Config{Inventory: tc.inventory})
			p := newTestProvider(t, sim, clusterA)
			got, err := p.ResolveTemplates(testCtx(t), tc.sel)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(err.Error()).To(ContainSubstring(tc.errText))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var refs []hypervisor.VMRef
			for _, tmpl := range got {
				refs = append(refs, tmpl.Ref)
				g.Expect(tmpl.BootDisk).To(Equal("scsi0"), "each copy's own configuration is read")
				g.Expect(tmpl.MemoryMiB).To(Equal(2048))
			}
			g.Expect(refs).To(Equal(tc.want))
		})
	}
}

// TestResolveTemplateStaysExact keeps ResolveTemplate's meaning: exactly one template, so a name
// kept on several nodes must be narrowed by node or VMID, as a claim's recorded template is.
func TestResolveTemplateStaysExact(t *testing.T) {
	g := NewWithT(t)
	inv := pvesim.DefaultInventory()
	inv.VMs = append(inv.VMs, pvesim.RunnerTemplate(9100, "pve3", "ubuntu-2404-runner", "40G", "runner"))
	sim := startSim(t, pvesim.Config{Inventory: inv})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)

	_, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	g.Expect(err).To(MatchError(hypervisor.ErrAmbiguous))
	g.Expect(err.Error()).To(ContainSubstring("pve1/9000, pve3/9100"))

	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{ID: "9100", Node: "pve3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tmpl.Ref).To(Equal(hypervisor.VMRef{Node: "pve3", ID: "9100"}))
	g.Expect(tmpl.DiskGiB).To(Equal(40))

	_, err = p.ResolveTemplate(ctx, hypervisor.TemplateSelector{ID: "9100", Node: "pve1"})
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound), "a recorded template that moved is not silently replaced")
}

// A template's Digest is the config digest PVE reports with it, and names the configuration's
// version: a change to the template gives another.
func TestTemplateDigestIsTheConfigDigest(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{Inventory: pvesim.DefaultInventory()})
	p := newTestProvider(t, sim, clusterA)
	sel := hypervisor.TemplateSelector{ID: "9000"}
	before, err := p.ResolveTemplate(testCtx(t), sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Digest).To(MatchRegexp(`^sha1:[0-9a-f]{40}$`))
	again, err := p.ResolveTemplate(testCtx(t), sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(before.Digest), "an unchanged template keeps its digest")
	g.Expect(sim.SetVMConfig(9000, "memory", "8192")).To(Succeed())
	after, err := p.ResolveTemplate(testCtx(t), sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Digest).To(MatchRegexp(`^sha1:[0-9a-f]{40}$`))
	g.Expect(after.Digest).NotTo(Equal(before.Digest), "a changed template has another digest")
}
