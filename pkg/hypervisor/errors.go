package hypervisor

import (
	"errors"
	"fmt"
)

// Classes of hypervisor errors. Implementations wrap their errors so errors.Is matches one of these,
// letting controllers choose between retrying and reporting a terminal condition.
var (
	// ErrNotFound: the VM, template, node or task does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the VM ID (or, for a provider that assigns IDs itself, the VM name) is taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrBusy: the VM is locked by another operation or in the wrong power state; retry later.
	ErrBusy = errors.New("busy")
	// ErrUnauthorized: the credentials were rejected.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the credentials lack a privilege.
	ErrForbidden = errors.New("forbidden")
	// ErrInvalid: the hypervisor rejected the request's parameters; retrying will not help.
	ErrInvalid = errors.New("invalid request")
	// ErrTransient: a timeout, connection failure or server error; retry with backoff.
	ErrTransient = errors.New("transient")
	// ErrNotOwned: the VM does not carry HyperFleet's ownership metadata, so it is never changed.
	ErrNotOwned = errors.New("not owned by HyperFleet")
	// ErrTaskFailed: an asynchronous task finished with an error.
	ErrTaskFailed = errors.New("task failed")
	// ErrAmbiguous: a template selector matched more than one template.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrLockTimeout: the hypervisor gave up waiting for a config or storage lock (Proxmox's
	// "can't lock file ... got timeout"): too much work at once on one storage. It is also
	// ErrBusy. Back off the whole cluster; it says nothing about the VM.
	ErrLockTimeout = fmt.Errorf("lock timeout: %w", ErrBusy)
	// ErrOverloaded: the hypervisor's API refused the call (503, or a connection closed without
	// an answer, as a saturated pveproxy does). It is also ErrTransient. Back off the whole
	// cluster, not each caller on its own.
	ErrOverloaded = fmt.Errorf("overloaded: %w", ErrTransient)
	// ErrUnsupported: the provider does not offer an optional capability (snapshots, guest
	// commands, NextID without Capabilities.PreallocatedIDs); retrying will not help.
	ErrUnsupported = errors.New("not supported by this hypervisor provider")
)

// Error is a classified hypervisor error: Class is one of the Err* sentinels, Op the operation.
type Error struct {
	Class error
	Op    string
	Err   error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s: %v", e.Op, e.Class)
	}
	return fmt.Sprintf("%s: %v: %v", e.Op, e.Class, e.Err)
}

func (e *Error) Unwrap() []error { return []error{e.Class, e.Err} }

// Errorf builds a classified error.
func Errorf(class error, op, format string, args ...any) error {
	return &Error{Class: class, Op: op, Err: fmt.Errorf(format, args...)}
}

// IsOverload reports whether err says the hypervisor has more work than it can take: a lock
// timeout or a refused call. Such errors slow the cluster's queue and are not the VM's failure.
func IsOverload(err error) bool {
	return errors.Is(err, ErrLockTimeout) || errors.Is(err, ErrOverloaded)
}

// IsRetryable reports whether an operation failing with err may succeed when retried unchanged.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrTransient)
}

// Reason maps an error to a short CamelCase reason for conditions and metrics.
func Reason(err error) string {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{ErrNotOwned, "NotOwned"},
		{ErrLockTimeout, "LockTimeout"},
		{ErrOverloaded, "Overloaded"},
		{ErrUnauthorized, "Unauthorized"},
		{ErrForbidden, "Forbidden"},
		{ErrNotFound, "NotFound"},
		{ErrAlreadyExists, "AlreadyExists"},
		{ErrBusy, "Busy"},
		{ErrInvalid, "Invalid"},
		{ErrTaskFailed, "TaskFailed"},
		{ErrAmbiguous, "Ambiguous"},
		{ErrUnsupported, "Unsupported"},
		{ErrNoGuestAgent, "NoGuestAgent"},
		{ErrTransient, "Transient"},
	} {
		if errors.Is(err, c.err) {
			return c.reason
		}
	}
	return "Error"
}
