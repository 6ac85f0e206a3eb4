// Package sweep decides, from one listing of a hypervisor cluster's owned VMs and the MachineClaims
// that point at it, which runners are finished (their VM stopped or vanished) and which VMs are
// orphans to remove. It decides only; the caller acts, so the rules are testable on their own.
package sweep
