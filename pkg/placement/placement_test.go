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
