package scaling

import "sort"

// RemovalOrder sorts runners in the order scale-down removes them, busy runners excluded:
//  1. runners still booting, newest first — the least work is lost and they hold no job;
//  2. ready idle runners, oldest first — they are closest to their idle TTL anyway.
//
// A busy runner is never returned: removing it would kill a job.
func RemovalOrder(runners []Runner) []Runner {
	var out []Runner
	for _, r := range runners {
		if !r.Busy {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Ready != b.Ready {
			return !a.Ready
		}
		if !a.Ready {
			return a.Created.After(b.Created)
		}
		if !a.ReadySince.Equal(b.ReadySince) {
			return a.ReadySince.Before(b.ReadySince)
		}
		return a.Name < b.Name
	})
	return out
}
