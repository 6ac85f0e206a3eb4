package lifecycle

import (
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Action is what to do with the VM's power.
type Action string

const (
	// None leaves the VM as it is.
	None Action = "None"
	// Start powers the VM on.
	Start Action = "Start"
	// Stop stops the VM gracefully (preStop hook, guest shutdown, power-off after the grace period).
	Stop Action = "Stop"
)

// Observation is what is known about a provisioned persistent VM.
type Observation struct {
	// State is the VM's power state.
	State hypervisor.PowerState
	// Cause is how a stopped VM came to be stopped; ignored while it runs.
	Cause infrav1.StopCause
	// Request is a pending power request (PowerRequestStart or PowerRequestStop), empty for none.
	Request string
}

// Decision is an Action with the reason for it, for conditions and Events.
type Decision struct {
	Action Action
	// Reason is a one-line explanation.
	Reason string
	// RequestAccepted says whether a pending power request was honoured (true) or refused
	// (false); meaningless without one.
	RequestAccepted bool
}

// Decide applies a run strategy to a provisioned VM. A VM that is paused, locked or in an unknown
// state is the caller's to leave alone; Decide answers None for anything not running or stopped.
// Power requests are honoured under Manual only: under the other strategies the strategy itself
// is the desired state, and a request is refused (change spec.runStrategy instead).
func Decide(strategy infrav1.RunStrategy, o Observation) Decision {
	running := o.State == hypervisor.PowerStateRunning
	stopped := o.State == hypervisor.PowerStateStopped
	if o.Request != "" && strategy != infrav1.RunStrategyManual {
		d := decideStrategy(strategy, running, stopped, o.Cause)
		d.RequestAccepted = false
		return d
	}
	if strategy == infrav1.RunStrategyManual {
		switch {
		case o.Request == infrav1.PowerRequestStart && stopped:
			return Decision{Action: Start, Reason: "start requested", RequestAccepted: true}
		case o.Request == infrav1.PowerRequestStop && running:
			return Decision{Action: Stop, Reason: "stop requested", RequestAccepted: true}
		case o.Request != "":
			return Decision{Action: None, Reason: "power request already satisfied", RequestAccepted: true}
		}
		return Decision{Action: None, Reason: "runStrategy Manual acts on power requests only"}
	}
	return decideStrategy(strategy, running, stopped, o.Cause)
}

func decideStrategy(strategy infrav1.RunStrategy, running, stopped bool, cause infrav1.StopCause) Decision {
	switch strategy {
	case infrav1.RunStrategyAlways:
		if stopped {
			return Decision{Action: Start, Reason: "runStrategy Always restarts a stopped VM"}
		}
	case infrav1.RunStrategyRerunOnFailure:
		if stopped {
			switch cause {
			case infrav1.StopCauseGuestShutdown:
				return Decision{Action: None, Reason: "the guest shut itself down; runStrategy RerunOnFailure leaves it off"}
			case infrav1.StopCauseRequested:
				return Decision{Action: None, Reason: "HyperFleet stopped the VM on request"}
			}
			return Decision{Action: Start, Reason: "the VM was stopped from outside the guest (" + string(cause) + "); runStrategy RerunOnFailure restarts it"}
		}
	case infrav1.RunStrategyHalted:
		if running {
			return Decision{Action: Stop, Reason: "runStrategy Halted keeps the VM off"}
		}
		return Decision{Action: None, Reason: "runStrategy Halted keeps the VM off"}
	case infrav1.RunStrategyOnce:
		if stopped && cause == infrav1.StopCauseNeverStarted {
			return Decision{Action: Start, Reason: "runStrategy Once runs a VM that never ran"}
		}
		if stopped {
			return Decision{Action: None, Reason: "runStrategy Once never restarts the VM"}
		}
	}
	return Decision{Action: None, Reason: "the VM is as its run strategy wants"}
}

// StartsWhenMade says whether a new persistent VM is started once it is provisioned, as KubeVirt
// starts a new VirtualMachine: under Always, RerunOnFailure and Once it is; under Halted it is
// not (nothing may run); under Manual only when a Start request is already pending (nothing is
// done automatically). A VM left off records StopCauseNeverStarted.
func StartsWhenMade(strategy infrav1.RunStrategy, request string) bool {
	switch strategy {
	case infrav1.RunStrategyHalted:
		return false
	case infrav1.RunStrategyManual:
		return request == infrav1.PowerRequestStart
	}
	return true
}
