package scaling

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genPolicy draws a pool's sizing rules, every timeout possibly disabled.
func genPolicy(rt *rapid.T) Policy {
	minR := rapid.IntRange(0, 4).Draw(rt, "min")
	p := Policy{Min: minR, Max: minR + rapid.IntRange(0, 8).Draw(rt, "span"), Idle: rapid.IntRange(0, 3).Draw(rt, "idle"),
		Warm: rapid.IntRange(0, 3).Draw(rt, "warm")}
	if rapid.Bool().Draw(rt, "explicitReplicas") {
		p.Replicas = ptr(rapid.IntRange(0, p.Max+3).Draw(rt, "replicas"))
	}
	timeout := func(label string) time.Duration {
		return time.Duration(rapid.SampledFrom([]int{0, 1, 5, 30, 90}).Draw(rt, label)) * time.Minute
	}
	p.IdleTTL, p.MaxLifetime, p.BootstrapTimeout, p.WarmMaxAge = timeout("idleTTL"), timeout("maxLifetime"),
		timeout("bootstrapTimeout"), timeout("warmMaxAge")
	return p
}

// genRunners draws a pool's runners in any mix of states: booting, idle, busy, deleting, warm,
// finished, unhealthy, seen stopped by the sweep, on a host in maintenance. Ages are in seconds
// before now, so timeouts fall on both sides of now.
func genRunners(rt *rapid.T, now time.Time) []Runner {
	n := rapid.IntRange(0, 12).Draw(rt, "runners")
	runners := make([]Runner, 0, n)
	for i := range n {
		label := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
		age := time.Duration(rapid.IntRange(0, 120*60).Draw(rt, label("age"))) * time.Second
		r := Runner{Name: fmt.Sprint("r", i), Created: now.Add(-age)}
		switch rapid.IntRange(0, 4).Draw(rt, label("state")) {
		case 0: // booting
		case 1: // ready and idle
			r.Ready = true
		case 2: // running a job
			r.Ready, r.Busy = true, true
		case 3: // warm: cloned, stopped, not started
			r.Warm = true
		case 4: // ready, its job just ended (the ledger says so) or not
			r.Ready, r.Done = true, true
			r.Busy = rapid.Bool().Draw(rt, label("doneBusy")) // the ledger may lag the platform
		}
		if r.Ready {
			r.ReadySince = r.Created.Add(time.Duration(rapid.Int64Range(0, int64(age)).Draw(rt, label("readyAfter"))))
		}
		r.Deleting = rapid.IntRange(0, 4).Draw(rt, label("deleting")) == 0
		r.Unhealthy = rapid.IntRange(0, 6).Draw(rt, label("unhealthy")) == 0
		r.VMStopped = rapid.IntRange(0, 5).Draw(rt, label("vmStopped")) == 0
		r.HostMaintenance = rapid.IntRange(0, 5).Draw(rt, label("maintenance")) == 0
		runners = append(runners, r)
	}
	return runners
}

// busyNotDeleting is Demand.Busy as the pool controller counts it.
func busyNotDeleting(runners []Runner) int {
	n := 0
	for _, r := range runners {
		if r.Busy && !r.Deleting {
			n++
		}
	}
	return n
}

// TestScaleDownNeverRemovesABusyRunner plans on generated pools of runners in every state and
// generated targets. Whatever they are, a runner running a job is removed only because a rule
// the pool's owner set says so (unhealthy, past maxLifetime), never to shrink the pool; a runner
// already being deleted is not removed again; and shrinking stops at the desired size (never
// below Min), runners still being deleted not counted toward it.
func TestScaleDownNeverRemovesABusyRunner(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := t0.Add(48 * time.Hour)
		p := genPolicy(rt)
		runners := genRunners(rt, now)
		d := Demand{Queued: rapid.IntRange(0, 2*p.Max+2).Draw(rt, "queued"), Busy: busyNotDeleting(runners)}
		plan := Decide(p, d, runners, now)

		if plan.Desired < p.Min || plan.Desired > p.Max {
			rt.Fatalf("desired %d outside [%d, %d]", plan.Desired, p.Min, p.Max)
		}
		byName := map[string]Runner{}
		for _, r := range runners {
			byName[r.Name] = r
		}
		removed := map[string]Removal{}
		for _, rm := range plan.Remove {
			r, ok := byName[rm.Name]
			switch {
			case !ok:
				rt.Fatalf("removal of unknown runner %q", rm.Name)
			case removed[rm.Name] != (Removal{}):
				rt.Fatalf("runner %s removed twice: %+v", rm.Name, plan.Remove)
			case r.Deleting:
				rt.Fatalf("runner %s is already being deleted and was removed again (%s)", r.Name, rm.Reason)
			case r.Busy && rm.Reason == ReasonScaleDown:
				rt.Fatalf("scale-down removed busy runner %s (%+v)", r.Name, r)
			case r.Busy && !slices.Contains([]Reason{ReasonUnhealthy, ReasonMaxLifetime}, rm.Reason):
				rt.Fatalf("busy runner %s removed for %s, which no policy applies to a runner running a job", r.Name, rm.Reason)
			case rm.Held && !(r.Busy && r.VMStopped):
				rt.Fatalf("runner %s held although not busy and seen stopped: %+v", r.Name, r)
			}
			removed[rm.Name] = rm
		}
		// What is left running jobs or waiting for one once the plan's removals are carried out:
		// runners being deleted do not count, held ones do (they keep their place).
		kept, scaledDown := 0, 0
		for _, r := range runners {
			rm, gone := removed[r.Name]
			if r.Deleting || r.Warm || (gone && !rm.Held) {
				if gone && rm.Reason == ReasonScaleDown && !r.Warm {
					scaledDown++
				}
				continue
			}
			kept++
		}
		if scaledDown > 0 && kept < plan.Desired {
			rt.Fatalf("scale-down of %d runners leaves %d, below the desired %d (min %d): %+v", scaledDown, kept, plan.Desired, p.Min, plan)
		}
		if scaledDown > 0 && (plan.Create > 0 || len(plan.Start) > 0) {
			rt.Fatalf("plan both shrinks and grows the pool: %+v", plan)
		}
	})
}

// replaced is the runners plan removes by a rule rather than to shrink the pool, and why.
func replaced(plan Plan) map[string]Reason {
	out := map[string]Reason{}
	for _, rm := range plan.Remove {
		if rm.Reason != ReasonScaleDown {
			out[rm.Name] = rm.Reason
		}
	}
	return out
}

// TestLifetimePoliciesAreMonotoneAndSpareJobs plans one generated pool at two generated instants.
// The lifetime policies (idle TTL, max lifetime, bootstrap timeout, warm max age) never retire a
// runner running a job except maxLifetime, which says so, and a disabled policy retires nothing;
// a runner replaced at one instant is still replaced at any later one; and Plan.Recheck is exact:
// nothing new is replaced before it, and something is at it.
func TestLifetimePoliciesAreMonotoneAndSpareJobs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := t0.Add(48 * time.Hour)
		p := genPolicy(rt)
		runners := genRunners(rt, now)
		d := Demand{Queued: rapid.IntRange(0, 2*p.Max+2).Draw(rt, "queued"), Busy: busyNotDeleting(runners)}
		later := now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Hour)).Draw(rt, "later")))
		first, second := Decide(p, d, runners, now), Decide(p, d, runners, later)

		byName := map[string]Runner{}
		for _, r := range runners {
			byName[r.Name] = r
		}
		disabled := map[Reason]bool{ReasonIdleTTL: p.IdleTTL == 0, ReasonMaxLifetime: p.MaxLifetime == 0,
			ReasonBootstrapTimeout: p.BootstrapTimeout == 0, ReasonWarmMaxAge: p.WarmMaxAge == 0}
		for _, plan := range []Plan{first, second} {
			for name, reason := range replaced(plan) {
				r := byName[name]
				if r.Busy && !slices.Contains([]Reason{ReasonMaxLifetime, ReasonUnhealthy}, reason) {
					rt.Fatalf("busy runner %s retired for %s before its job ended", name, reason)
				}
				if disabled[reason] {
					rt.Fatalf("runner %s retired for %s, which the policy disables", name, reason)
				}
			}
		}
		again := replaced(second)
		for name, reason := range replaced(first) {
			if _, ok := again[name]; !ok {
				rt.Fatalf("runner %s replaced (%s) at %s but kept %s later", name, reason, now.Format(time.TimeOnly), later.Sub(now))
			}
		}

		if first.Recheck == 0 {
			if n, m := len(replaced(first)), len(replaced(second)); m != n {
				rt.Fatalf("no recheck armed, yet %d more runners are replaced %s later", m-n, later.Sub(now))
			}
			return
		}
		before, at := Decide(p, d, runners, now.Add(first.Recheck-time.Millisecond)), Decide(p, d, runners, now.Add(first.Recheck))
		if n, m := len(replaced(first)), len(replaced(before)); m != n {
			rt.Fatalf("recheck in %s, yet %d runners are replaced before it (%d now)", first.Recheck, m, n)
		}
		if n, m := len(replaced(first)), len(replaced(at)); m <= n {
			rt.Fatalf("recheck in %s, yet nothing more is replaced then (%d, %d now)", first.Recheck, m, n)
		}
	})
}
