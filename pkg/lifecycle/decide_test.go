package lifecycle

import (
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

func TestDecide(t *testing.T) {
	const (
		running = hypervisor.PowerStateRunning
		stopped = hypervisor.PowerStateStopped
		paused  = hypervisor.PowerStatePaused
		unknown = hypervisor.PowerStateUnknown
	)
	var (
		guest     = infrav1.StopCauseGuestShutdown
		outside   = infrav1.StopCauseHypervisorStop
		requested = infrav1.StopCauseRequested
		noRecord  = infrav1.StopCauseUnknown
	)
	for _, tc := range []struct {
		name     string
		strategy infrav1.RunStrategy
		obs      Observation
		want     Action
		accepted bool
	}{
		{"Always keeps a running VM", infrav1.RunStrategyAlways, Observation{State: running}, None, false},
		{"Always restarts after a guest shutdown", infrav1.RunStrategyAlways, Observation{State: stopped, Cause: guest}, Start, false},
		{"Always restarts after a hypervisor stop", infrav1.RunStrategyAlways, Observation{State: stopped, Cause: outside}, Start, false},
		{"Always refuses a stop request and keeps running", infrav1.RunStrategyAlways, Observation{State: running, Request: infrav1.PowerRequestStop}, None, false},
		{"Always leaves a paused VM", infrav1.RunStrategyAlways, Observation{State: paused}, None, false},
		{"Always leaves an unknown VM", infrav1.RunStrategyAlways, Observation{State: unknown}, None, false},

		{"RerunOnFailure leaves a guest shutdown off", infrav1.RunStrategyRerunOnFailure, Observation{State: stopped, Cause: guest}, None, false},
		{"RerunOnFailure restarts a hypervisor stop", infrav1.RunStrategyRerunOnFailure, Observation{State: stopped, Cause: outside}, Start, false},
		{"RerunOnFailure restarts a stop nobody recorded", infrav1.RunStrategyRerunOnFailure, Observation{State: stopped, Cause: noRecord}, Start, false},
		{"RerunOnFailure leaves a requested stop off", infrav1.RunStrategyRerunOnFailure, Observation{State: stopped, Cause: requested}, None, false},
		{"RerunOnFailure keeps a running VM", infrav1.RunStrategyRerunOnFailure, Observation{State: running}, None, false},

		{"Halted stops a running VM", infrav1.RunStrategyHalted, Observation{State: running}, Stop, false},
		{"Halted leaves a stopped VM", infrav1.RunStrategyHalted, Observation{State: stopped, Cause: outside}, None, false},
		{"Halted refuses a start request", infrav1.RunStrategyHalted, Observation{State: stopped, Request: infrav1.PowerRequestStart}, None, false},

		{"Manual leaves a stopped VM", infrav1.RunStrategyManual, Observation{State: stopped, Cause: outside}, None, false},
		{"Manual leaves a running VM", infrav1.RunStrategyManual, Observation{State: running}, None, false},
		{"Manual starts on request", infrav1.RunStrategyManual, Observation{State: stopped, Request: infrav1.PowerRequestStart}, Start, true},
		{"Manual stops on request", infrav1.RunStrategyManual, Observation{State: running, Request: infrav1.PowerRequestStop}, Stop, true},
		{"Manual start request on a running VM is satisfied", infrav1.RunStrategyManual, Observation{State: running, Request: infrav1.PowerRequestStart}, None, true},
		{"Manual stop request on a stopped VM is satisfied", infrav1.RunStrategyManual, Observation{State: stopped, Request: infrav1.PowerRequestStop}, None, true},

		{"Once leaves a guest shutdown off", infrav1.RunStrategyOnce, Observation{State: stopped, Cause: guest}, None, false},
		{"Once leaves a hypervisor stop off", infrav1.RunStrategyOnce, Observation{State: stopped, Cause: outside}, None, false},
		{"Once keeps a running VM", infrav1.RunStrategyOnce, Observation{State: running}, None, false},
		{"Once refuses a start request", infrav1.RunStrategyOnce, Observation{State: stopped, Request: infrav1.PowerRequestStart}, None, false},
		{"Once runs a VM that never ran", infrav1.RunStrategyOnce, Observation{State: stopped, Cause: infrav1.StopCauseNeverStarted}, Start, false},
		{"RerunOnFailure starts a VM that never ran", infrav1.RunStrategyRerunOnFailure, Observation{State: stopped, Cause: infrav1.StopCauseNeverStarted}, Start, false},
		{"Always starts a VM that never ran", infrav1.RunStrategyAlways, Observation{State: stopped, Cause: infrav1.StopCauseNeverStarted}, Start, false},
		{"Halted leaves a VM that never ran off", infrav1.RunStrategyHalted, Observation{State: stopped, Cause: infrav1.StopCauseNeverStarted}, None, false},
		{"Manual leaves a VM that never ran off", infrav1.RunStrategyManual, Observation{State: stopped, Cause: infrav1.StopCauseNeverStarted}, None, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := Decide(tc.strategy, tc.obs)
			g.Expect(d.Action).To(Equal(tc.want), d.Reason)
			g.Expect(d.Reason).NotTo(BeEmpty())
			if tc.obs.Request != "" {
				g.Expect(d.RequestAccepted).To(Equal(tc.accepted))
			}
		})
	}
}

// TestStartsWhenMade: a new VM is started as KubeVirt starts a new VirtualMachine.
func TestStartsWhenMade(t *testing.T) {
	g := NewWithT(t)
	for strategy, want := range map[infrav1.RunStrategy]bool{infrav1.RunStrategyAlways: true, infrav1.RunStrategyRerunOnFailure: true,
		infrav1.RunStrategyOnce: true, infrav1.RunStrategyHalted: false, infrav1.RunStrategyManual: false} {
		g.Expect(StartsWhenMade(strategy, "")).To(Equal(want), string(strategy))
	}
	g.Expect(StartsWhenMade(infrav1.RunStrategyManual, infrav1.PowerRequestStart)).To(BeTrue(), "a pending Start request starts a Manual VM")
	g.Expect(StartsWhenMade(infrav1.RunStrategyManual, infrav1.PowerRequestStop)).To(BeFalse())
	g.Expect(StartsWhenMade(infrav1.RunStrategyHalted, infrav1.PowerRequestStart)).To(BeFalse(), "Halted refuses requests")
}
