package vmpool

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestProgressed(t *testing.T) {
	g := NewWithT(t)
	base := Progress{Hash: "a", Updated: 1, Available: 2, Existing: 4}
	for name, tc := range map[string]struct {
		now  Progress
		want bool
	}{
		"nothing changed":             {base, false},
		"a new template":              {Progress{Hash: "b", Updated: 0, Available: 2, Existing: 4}, true},
		"one more VM of the template": {Progress{Hash: "a", Updated: 2, Available: 2, Existing: 5}, true},
		"one more available":          {Progress{Hash: "a", Updated: 1, Available: 3, Existing: 4}, true},
		"an outdated VM gone":         {Progress{Hash: "a", Updated: 1, Available: 2, Existing: 3}, true},
		"a VM became unavailable":     {Progress{Hash: "a", Updated: 1, Available: 1, Existing: 4}, false},
	} {
		g.Expect(Progressed(base, tc.now)).To(Equal(tc.want), name)
	}
}

func TestDeadlineExceeded(t *testing.T) {
	g := NewWithT(t)
	last := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	over, left := DeadlineExceeded(last, 10*time.Minute, last.Add(9*time.Minute))
	g.Expect(over).To(BeFalse())
	g.Expect(left).To(Equal(time.Minute))
	over, _ = DeadlineExceeded(last, 10*time.Minute, last.Add(10*time.Minute))
	g.Expect(over).To(BeTrue())
}
