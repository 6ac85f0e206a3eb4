package placement

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// TargetState is why a pool's target may or may not take new runners.
type TargetState string

const (
	// TargetReady takes new runners.
	TargetReady TargetState = "Ready"
	// TargetDown is skipped: its Cluster or HypervisorCluster is missing or not Available.
	TargetDown TargetState = "Down"
	// TargetFull is skipped: a runner of it is waiting for capacity (NoCapacity).
	TargetFull TargetState = "Full"
	// TargetFailing is skipped: runners of it failed to provision recently.
	TargetFailing TargetState = "Failing"
)

// ErrNoTarget means every target of a pool is down, full or failing.
var ErrNoTarget = errors.New("no target can take a runner")

// Target is one place a pool's runners may go: a HypervisorCluster (through its Cluster and
// MachineClaimTemplate), with its order and what it holds now.
type Target struct {
	Name string
	// Priority orders targets: lower first; a target is used only while every lower one is skipped.
	Priority int32
	// Weight shares runners among ready targets of equal priority in proportion (at least 1).
	Weight int32
	// Runners is how many of the pool's runners the target holds.
	Runners int
	State   TargetState
	// Reason says why a target that is not ready is skipped.
	Reason string
}

// ChooseTarget returns the index of the target the next runner goes to: among the ready targets
// of the lowest priority, the one holding the fewest runners for its weight (ties to the first
// listed), so equal weights fill evenly and a target that recovers gets runners again at once.
func ChooseTarget(targets []Target) (int, error) {
	best := -1
	for i, t := range targets {
		if t.State != TargetReady {
			continue
		}
		if best < 0 || t.Priority < targets[best].Priority ||
			t.Priority == targets[best].Priority && fuller(targets[best], t) {
			best = i
		}
	}
	if best < 0 {
		return -1, fmt.Errorf("%w: %s", ErrNoTarget, skipped(targets))
	}
	return best, nil
}

// fuller reports whether a holds more runners for its weight than b: a.Runners/a.Weight >
// b.Runners/b.Weight, compared without division.
func fuller(a, b Target) bool {
	return int64(a.Runners)*int64(weight(b)) > int64(b.Runners)*int64(weight(a))
}

func weight(t Target) int32 { return max(t.Weight, 1) }

// Plan assigns n new runners one by one with ChooseTarget, counting each as it goes, and returns
// the target index of each; fewer than n when every target is skipped.
func Plan(targets []Target, n int) []int {
	ts := append([]Target(nil), targets...)
	var out []int
	for range n {
		i, err := ChooseTarget(ts)
		if err != nil {
			break
		}
		ts[i].Runners++
		out = append(out, i)
	}
	return out
}

func skipped(targets []Target) string {
	if len(targets) == 0 {
		return "the pool has no targets"
	}
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		parts = append(parts, fmt.Sprintf("%s is %s (%s)", t.Name, strings.ToLower(string(t.State)), t.Reason))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
