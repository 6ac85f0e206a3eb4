package placement

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

const gib = 1 << 30

func TestChooseNode(t *testing.T) {
	nodes := []hypervisor.Node{
		{Name: "pve1", Online: true, MemoryFree: 8 * gib},
		{Name: "pve2", Online: true, MemoryFree: 32 * gib},
		{Name: "pve3", Online: false, MemoryFree: 64 * gib},
		{Name: "pve4", Online: true, MemoryFree: 32 * gib},
	}
	cases := []struct {
		name    string
		req     Request
		want    string
		wantErr bool
	}{
		{name: "most free memory, offline nodes skipped, ties by name", req: Request{MemoryMiB: 1024}, want: "pve2"},
		{name: "allowed nodes only", req: Request{MemoryMiB: 1024, Allowed: []string{"pve1", "pve3"}}, want: "pve1"},
		{name: "failure domain wins", req: Request{MemoryMiB: 1024, FailureDomain: "pve4"}, want: "pve4"},
		{name: "reservations count", req: Request{MemoryMiB: 1024, Reserved: map[string]int{"pve2": 16 * 1024}}, want: "pve4"},
		{name: "too big for any node", req: Request{MemoryMiB: 40 * 1024}, wantErr: true},
		{name: "failure domain full", req: Request{MemoryMiB: 10 * 1024, FailureDomain: "pve1"}, wantErr: true},
		{name: "offline failure domain", req: Request{MemoryMiB: 1, FailureDomain: "pve3"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ChooseNode(nodes, tc.req)
			if tc.wantErr {
				g.Expect(err).To(MatchError(ErrNoCapacity))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestCandidateStableAndSpread(t *testing.T) {
	g := NewWithT(t)
	r := Range{Start: 1000, End: 1999}
	g.Expect(Candidate(r, "uid-a", 0)).To(Equal(Candidate(r, "uid-a", 0)), "a restart proposes the same ID")
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		c := Candidate(r, string(rune('a'+i%26))+string(rune('A'+i/26)), 0)
		g.Expect(c).To(BeNumerically(">=", r.Start))
		g.Expect(c).To(BeNumerically("<=", r.End))
		seen[c] = true
	}
	g.Expect(len(seen)).To(BeNumerically(">", 40), "50 claims rarely share a starting ID")
	g.Expect(Candidate(r, "uid-a", 1)).NotTo(Equal(Candidate(r, "uid-a", 0)), "a retry moves on")
}

func TestChooseTemplate(t *testing.T) {
	nodes := []hypervisor.Node{
		{Name: "pve1", Online: true, MemoryFree: 8 * gib},
		{Name: "pve2", Online: true, MemoryFree: 32 * gib},
		{Name: "pve3", Online: false, MemoryFree: 64 * gib},
		{Name: "pve4", Online: true, MemoryFree: 16 * gib},
	}
	copyOn := func(node string, id int) hypervisor.Template {
		return hypervisor.Template{Ref: hypervisor.VMRef{Node: node, ID: idOf(id)}, Name: "ubuntu-2404-runner"}
	}
	copies := []hypervisor.Template{copyOn("pve1", 9000), copyOn("pve3", 9100), copyOn("pve4", 9200)}
	cases := []struct {
		name    string
		req     Request
		want    int
		wantErr error
	}{
		{name: "the emptiest node holding a copy, not the emptiest node", req: Request{MemoryMiB: 1024}, want: 9200},
		{name: "offline nodes are skipped", req: Request{MemoryMiB: 1024, Allowed: []string{"pve1", "pve3"}}, want: 9000},
		{name: "reservations move the next clone to another copy", req: Request{MemoryMiB: 1024, Reserved: map[string]int{"pve4": 12 * 1024}}, want: 9000},
		{name: "failure domain with a copy", req: Request{MemoryMiB: 1024, FailureDomain: "pve1"}, want: 9000},
		{name: "failure domain without a copy", req: Request{MemoryMiB: 1024, FailureDomain: "pve2"}, wantErr: ErrNoTemplate},
		{name: "no copy on an allowed node", req: Request{MemoryMiB: 1024, Allowed: []string{"pve2"}}, wantErr: ErrNoTemplate},
		{name: "no node with a copy has room", req: Request{MemoryMiB: 20 * 1024}, wantErr: ErrNoCapacity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ChooseTemplate(nodes, copies, tc.req)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Ref.ID).To(Equal(idOf(tc.want)))
		})
	}
}

func TestTemplateOn(t *testing.T) {
	g := NewWithT(t)
	copies := []hypervisor.Template{{Ref: hypervisor.VMRef{Node: "pve1", ID: "9000"}}, {Ref: hypervisor.VMRef{Node: "pve3", ID: "9100"}}}
	g.Expect(TemplateOn(copies, "pve3").Ref.ID).To(Equal("9100"), "a full clone copies from its own node's template")
	g.Expect(TemplateOn(copies, "pve2").Ref.ID).To(Equal("9000"), "or from the first copy")
}

func TestAllowedNodes(t *testing.T) {
	g := NewWithT(t)
	nodes := []hypervisor.Node{{Name: "pve1"}, {Name: "pve2"}, {Name: "pve3"}}
	g.Expect(AllowedNodes(nodes, nil)).To(Equal(nodes), "no restriction keeps every node")
	g.Expect(AllowedNodes(nodes, []string{"pve3", "pve1", "pve9"})).To(Equal([]hypervisor.Node{{Name: "pve1"}, {Name: "pve3"}}),
		"only listed nodes, in the provider's order; unknown names add nothing")
	g.Expect(AllowedNodes(nodes, []string{"pve9"})).To(BeEmpty())
}
