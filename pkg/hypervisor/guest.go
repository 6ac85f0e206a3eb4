package hypervisor

import (
	"context"
	"errors"
	"time"
)

// ErrNoGuestAgent: the VM has no guest agent configured, so nothing can run inside it through the
// hypervisor. Retrying will not help; a guest agent that is configured but not answering yet is
// ErrBusy instead.
var ErrNoGuestAgent = errors.New("no guest agent configured")

// GuestExecer runs commands inside a VM through the hypervisor's guest agent (QEMU guest agent on
// Proxmox). It is optional: a provider without it cannot run lifecycle hooks.
type GuestExecer interface {
	// GuestExec starts command (program and arguments, no shell) in an owned VM's guest and
	// returns the guest's process ID. It fails with ErrNoGuestAgent when the VM has no agent and
	// ErrBusy while the agent does not answer (the VM is booting).
	GuestExec(ctx context.Context, ref VMRef, command []string) (pid int64, err error)
	// GuestExecStatus reports on a command GuestExec started.
	GuestExecStatus(ctx context.Context, ref VMRef, pid int64) (ExecStatus, error)
}

// ExecStatus is the state of a command running in a guest.
type ExecStatus struct {
	Exited   bool
	ExitCode int
	// Signal is the signal that ended the command, 0 for none.
	Signal int
	Stdout string
	Stderr string
}

// StopCause is how a stopped VM came to be stopped, as far as the hypervisor's records tell.
type StopCause string

const (
	// StopByGuest: no stop was asked of the hypervisor since the VM last started: the guest
	// powered itself off. (A crash of the VM's process leaves no record either and reads the same.)
	StopByGuest StopCause = "Guest"
	// StopByHypervisor: a stop or shutdown was asked of the hypervisor (API, CLI, HA).
	StopByHypervisor StopCause = "Hypervisor"
	// StopUnknown: the hypervisor has no record of the VM's last start or stop.
	StopUnknown StopCause = "Unknown"
)

// StopRecord is what the hypervisor recorded about a VM's last stop.
type StopRecord struct {
	Cause StopCause
	// Task is the stop's task, empty for StopByGuest and StopUnknown.
	Task TaskID
	// User asked for the stop, when known.
	User string
	// Time is when the stop (or, for StopByGuest, the last start) was recorded.
	Time time.Time
}

// StopReporter tells how a stopped VM came to be stopped. It is optional: without it every stop
// is StopUnknown.
type StopReporter interface {
	LastStop(ctx context.Context, ref VMRef) (StopRecord, error)
}
