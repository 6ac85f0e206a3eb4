package lifecycle

import (
	"flag"
	"testing"

	"pgregory.net/rapid"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// TestRunStrategiesActOnlyAsTheySayAndSettle decides on generated observations of a persistent
// VM (any power state, how it last stopped, any pending power request) under every run
// strategy. Only a stopped VM is started and only a running one stopped, anything else is left
// alone; Halted never starts a VM and Once only one that never ran, Always and RerunOnFailure never stop one,
// RerunOnFailure never restarts a VM its guest shut down or HyperFleet stopped on request; a power
// request is honoured under Manual only, and Manual does nothing without one; and the decision
// settles: once the VM is in the state the action leads to (a VM HyperFleet stopped records it
// as requested) and the request is done, the answer is None.
func TestRunStrategiesActOnlyAsTheySayAndSettle(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("2000") // 300 combinations: draw each many times over, in milliseconds
		defer func() { _ = f.Value.Set(f.DefValue) }()
	}
	strategies := []infrav1.RunStrategy{infrav1.RunStrategyAlways, infrav1.RunStrategyRerunOnFailure, infrav1.RunStrategyHalted,
		infrav1.RunStrategyManual, infrav1.RunStrategyOnce}
	states := []hypervisor.PowerState{hypervisor.PowerStateRunning, hypervisor.PowerStateStopped, hypervisor.PowerStatePaused,
		hypervisor.PowerStateUnknown}
	causes := []infrav1.StopCause{infrav1.StopCauseGuestShutdown, infrav1.StopCauseHypervisorStop, infrav1.StopCauseRequested,
		infrav1.StopCauseUnknown, infrav1.StopCauseNeverStarted, ""}
	requests := []string{"", infrav1.PowerRequestStart, infrav1.PowerRequestStop}
	rapid.Check(t, func(rt *rapid.T) {
		strategy := rapid.SampledFrom(strategies).Draw(rt, "strategy")
		o := Observation{State: rapid.SampledFrom(states).Draw(rt, "state"), Cause: rapid.SampledFrom(causes).Draw(rt, "cause"),
			Request: rapid.SampledFrom(requests).Draw(rt, "request")}
		d := Decide(strategy, o)

		switch {
		case d.Action == Start && o.State != hypervisor.PowerStateStopped:
			rt.Fatalf("%s started a VM that is %s", strategy, o.State)
		case d.Action == Stop && o.State != hypervisor.PowerStateRunning:
			rt.Fatalf("%s stopped a VM that is %s", strategy, o.State)
		case d.Action == Start && strategy == infrav1.RunStrategyHalted:
			rt.Fatalf("%s started a VM (%+v)", strategy, o)
		case d.Action == Start && strategy == infrav1.RunStrategyOnce && o.Cause != infrav1.StopCauseNeverStarted:
			rt.Fatalf("Once started a VM that had run (%+v)", o)
		case d.Action == Stop && (strategy == infrav1.RunStrategyAlways || strategy == infrav1.RunStrategyRerunOnFailure):
			rt.Fatalf("%s stopped a VM (%+v)", strategy, o)
		case d.Action == Start && strategy == infrav1.RunStrategyRerunOnFailure &&
			(o.Cause == infrav1.StopCauseGuestShutdown || o.Cause == infrav1.StopCauseRequested):
			rt.Fatalf("RerunOnFailure restarted a VM stopped by its guest or on request (%s)", o.Cause)
		case d.RequestAccepted && (o.Request == "" || strategy != infrav1.RunStrategyManual):
			rt.Fatalf("%s accepted request %q", strategy, o.Request)
		case strategy == infrav1.RunStrategyManual && o.Request != "" && !d.RequestAccepted:
			rt.Fatalf("Manual refused request %q", o.Request)
		case strategy == infrav1.RunStrategyManual && d.Action != None &&
			string(d.Action) != o.Request:
			rt.Fatalf("Manual answered %s to request %q", d.Action, o.Request)
		}

		// Carry the action out and look again, the request done.
		after := Observation{State: o.State, Cause: o.Cause}
		switch d.Action {
		case Start:
			after.State, after.Cause = hypervisor.PowerStateRunning, ""
		case Stop:
			after.State, after.Cause = hypervisor.PowerStateStopped, infrav1.StopCauseRequested
		}
		if again := Decide(strategy, after); again.Action != None {
			rt.Fatalf("%s does not settle: %+v → %s, then %+v → %s", strategy, o, d.Action, after, again.Action)
		}
	})
}
