package placement

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestChooseTarget(t *testing.T) {
	ready := func(name string, prio, weight int32, runners int) Target {
		return Target{Name: name, Priority: prio, Weight: weight, Runners: runners, State: TargetReady}
	}
	skip := func(tg Target, st TargetState) Target { tg.State, tg.Reason = st, "because"; return tg }
	for _, tc := range []struct {
		name    string
		targets []Target
		want    int
	}{
		{"single", []Target{ready("pve", 0, 1, 3)}, 0},
		{"lower priority first however full", []Target{ready("pve", 1, 1, 0), ready("hv", 0, 1, 9)}, 1},
		{"spill over a down target", []Target{skip(ready("hv", 0, 1, 0), TargetDown), ready("pve", 1, 1, 5)}, 1},
		{"spill over a full target", []Target{skip(ready("hv", 0, 1, 0), TargetFull), ready("pve", 1, 1, 5)}, 1},
		{"spill over a failing target", []Target{skip(ready("hv", 0, 1, 0), TargetFailing), ready("pve", 1, 1, 5)}, 1},
		{"a recovered target is first again", []Target{ready("hv", 0, 1, 0), ready("pve", 1, 1, 5)}, 0},
		{"equal weights fill evenly", []Target{ready("a", 0, 1, 2), ready("b", 0, 1, 1)}, 1},
		{"ties go to the first listed", []Target{ready("a", 0, 1, 1), ready("b", 0, 1, 1)}, 0},
		{"weights share in proportion", []Target{ready("a", 0, 3, 2), ready("b", 0, 1, 1)}, 0},
		{"weights share in proportion, b's turn", []Target{ready("a", 0, 3, 3), ready("b", 0, 1, 0)}, 1},
		{"zero weight counts as one", []Target{ready("a", 0, 0, 1), ready("b", 0, 1, 2)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseTarget(tc.targets)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

func TestChooseTargetAllSkipped(t *testing.T) {
	g := NewWithT(t)
	_, err := ChooseTarget([]Target{
		{Name: "hv", State: TargetDown, Reason: "HypervisorCluster hv is not available"},
		{Name: "pve", State: TargetFull, Reason: "runner-x waits for capacity"},
	})
	g.Expect(errors.Is(err, ErrNoTarget)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("hv is down (HypervisorCluster hv is not available)"))
	g.Expect(err.Error()).To(ContainSubstring("pve is full (runner-x waits for capacity)"))
	_, err = ChooseTarget(nil)
	g.Expect(errors.Is(err, ErrNoTarget)).To(BeTrue())
}

func TestPlanTargets(t *testing.T) {
	g := NewWithT(t)
	ts := []Target{
		{Name: "a", Priority: 0, Weight: 2, State: TargetReady},
		{Name: "b", Priority: 0, Weight: 1, State: TargetReady},
		{Name: "c", Priority: 1, Weight: 1, State: TargetReady},
	}
	g.Expect(Plan(ts, 6)).To(Equal([]int{0, 1, 0, 0, 1, 0}), "2:1 by weight, the lower priority unused")
	g.Expect(ts[0].Runners).To(BeZero(), "the caller's targets are not changed")
	ts[0].State, ts[1].State = TargetFailing, TargetDown
	g.Expect(Plan(ts, 2)).To(Equal([]int{2, 2}))
	ts[2].State = TargetFull
	g.Expect(Plan(ts, 2)).To(BeEmpty())
}
