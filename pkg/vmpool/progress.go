package vmpool

import "time"

// Progress is what a pool's headway is judged by: its current template and how far its VMs are.
type Progress struct {
	// Hash is the current template's hash.
	Hash string
	// Updated and Available count live VMs of the current template, and available ones.
	Updated, Available int
	// Existing counts every VM, those being deleted too.
	Existing int
}

// ProgressOf is the Progress of the pool's VMs under the template hash.
func ProgressOf(hash string, c Counts) Progress {
	return Progress{Hash: hash, Updated: c.Updated, Available: c.Available, Existing: c.Existing}
}

// Progressed says whether a pool moved forward from before to now, as a Deployment's progress is
// judged: a new template starts a new rollout; more VMs of the current template, or more available
// ones; or fewer VMs in all (an outdated or surplus VM gone, counted only once it is deleted, not
// when it is asked to go). A VM turning unavailable is not progress.
func Progressed(before, now Progress) bool {
	return before.Hash != now.Hash || now.Updated > before.Updated || now.Available > before.Available ||
		now.Existing < before.Existing
}

// DeadlineExceeded says whether a pool still under way, whose last progress was at last, has
// gone deadline without progress by now; otherwise it also returns how long until it would.
func DeadlineExceeded(last time.Time, deadline time.Duration, now time.Time) (bool, time.Duration) {
	left := last.Add(deadline).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}
