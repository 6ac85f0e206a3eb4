package scaling

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPoolStaysWithinBoundsOverTime drives a simulated pool through generated sequences of
// demand changes, plans applied, jobs finishing, runners failing and deletions that complete late
// or not at all. Whatever the order, the runners that exist (those still being deleted included,
// as their VMs may still run) never exceed Max once they were within it, and when nothing is
// deleting and demand is steady the pool converges to the desired size within [Min, Max].
func TestPoolStaysWithinBoundsOverTime(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		minR := rapid.IntRange(0, 4).Draw(rt, "min")
		p := Policy{Min: minR, Max: minR + rapid.IntRange(0, 8).Draw(rt, "span"), Idle: rapid.IntRange(0, 3).Draw(rt, "idle")}
		now := t0
		var runners []Runner
		seq := 0
		queued := 0
		exists := func() int { return len(runners) }
		apply := func() {
			busy := 0
			for _, r := range runners {
				if r.Busy && !r.Deleting {
					busy++
				}
			}
			plan := Decide(p, Demand{Queued: queued, Busy: busy}, runners, now)
			if plan.Desired < p.Min || plan.Desired > p.Max {
				rt.Fatalf("desired %d outside [%d, %d]", plan.Desired, p.Min, p.Max)
			}
			remove := map[string]bool{}
			for _, rm := range plan.Remove {
				if !rm.Held {
					remove[rm.Name] = true
				}
			}
			for i := range runners {
				if remove[runners[i].Name] {
					if runners[i].Busy && !runners[i].Unhealthy {
						rt.Fatalf("plan removed busy runner %s (%+v)", runners[i].Name, plan)
					}
					runners[i].Deleting = true
				}
			}
			for range plan.Create {
				seq++
				runners = append(runners, Runner{Name: fmt.Sprint("r", seq), Created: now})
			}
		}
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 6).Draw(rt, fmt.Sprint("op", step)) {
			case 0: // demand changes
				queued = rapid.IntRange(0, 3*p.Max+3).Draw(rt, fmt.Sprint("queued", step))
			case 1: // a runner becomes ready, or takes a queued job
				for i := range runners {
					r := &runners[i]
					if r.Deleting {
						continue
					}
					if !r.Ready {
						r.Ready, r.ReadySince = true, now
						break
					}
					if !r.Busy && queued > 0 {
						r.Busy = true
						queued--
						break
					}
				}
			case 2: // a job finishes: the one-job runner is deleted
				for i := range runners {
					if runners[i].Busy && !runners[i].Deleting {
						runners[i].Busy, runners[i].Deleting = false, true
						break
					}
				}
			case 3: // a deletion completes (the oldest), or never does
				for i := range runners {
					if runners[i].Deleting {
						runners = append(runners[:i], runners[i+1:]...)
						break
					}
				}
			case 4: // a runner fails its health check
				if len(runners) > 0 {
					i := rapid.IntRange(0, len(runners)-1).Draw(rt, fmt.Sprint("unhealthy", step))
					runners[i].Unhealthy = true
				}
			default:
				apply()
			}
			now = now.Add(time.Minute)
			if exists() > p.Max {
				rt.Fatalf("step %d: %d runners exist (deleting included), max %d", step, exists(), p.Max)
			}
		}
		// Settle: every deletion completes, demand holds still, the pool converges.
		for range 3 * (p.Max + 2) {
			for i := 0; i < len(runners); {
				if runners[i].Deleting {
					runners = append(runners[:i], runners[i+1:]...)
					continue
				}
				i++
			}
			apply()
		}
		busy, live := 0, 0
		for _, r := range runners {
			if !r.Deleting {
				live++
				if r.Busy {
					busy++
				}
			}
		}
		want, _ := DesiredReplicas(p, Demand{Queued: queued, Busy: busy})
		if live != want && !(live > want && live == busy) {
			rt.Fatalf("settled at %d runners (%d busy), desired %d in [%d, %d]", live, busy, want, p.Min, p.Max)
		}
	})
}
