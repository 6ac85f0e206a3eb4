package scaling

import (
	"sort"
	"time"
)

// planWarm sizes the warm tier: Policy.Warm warm runners, within what Max leaves beside the desired
// runners. Missing ones are created in the room left (room); surplus ones are removed, newest
// first, before any idle runner would be: a warm VM holds no job and no registration.
func planWarm(p Policy, plan *Plan, warm []Runner, desired, room int) {
	want := max(0, min(p.Warm, p.Max-desired))
	plan.WarmTarget = want
	switch n := len(warm); {
	case n < want:
		plan.CreateWarm = max(0, min(want-n, room))
	case n > want:
		// Keep the oldest: each is as good as another, and the newest has the least work in it
		// only while it clones; removing newest first also keeps a clone in flight from piling up.
		surplus := sortOldestFirst(warm)[want:]
		for i := len(surplus) - 1; i >= 0; i-- {
			plan.Remove = append(plan.Remove, Removal{Name: surplus[i].Name, Reason: ReasonScaleDown})
		}
	}
}

// mustReplaceWarm tells whether a warm runner must go: marked unhealthy, on a host in maintenance,
// or past WarmMaxAge. The other timeouts do not apply to a VM that was never started.
func mustReplaceWarm(p Policy, r Runner, now time.Time) (Reason, bool) {
	switch {
	case r.Unhealthy:
		return ReasonUnhealthy, true
	case r.HostMaintenance:
		// Replaced by a warm VM on another host, rather than started where it cannot stay.
		return ReasonHostMaintenance, true
	case p.WarmMaxAge > 0 && now.Sub(r.Created) > p.WarmMaxAge:
		return ReasonWarmMaxAge, true
	}
	return "", false
}

// nextWarmTimeout is how long until a warm runner passes WarmMaxAge, zero when disabled.
func nextWarmTimeout(p Policy, r Runner, now time.Time) time.Duration {
	if p.WarmMaxAge <= 0 {
		return 0
	}
	return max(0, r.Created.Add(p.WarmMaxAge).Sub(now)+time.Millisecond)
}

func sortOldestFirst(rs []Runner) []Runner {
	out := append([]Runner(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out
}
