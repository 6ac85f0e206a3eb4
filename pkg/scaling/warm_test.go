package scaling

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"pgregory.net/rapid"
)

func TestDecideWarmTier(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	p := Policy{Min: 0, Max: 4, Warm: 2, WarmMaxAge: time.Hour, IdleTTL: 30 * time.Minute, MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
	warm := func(name string, age time.Duration) Runner {
		return Runner{Name: name, Created: now.Add(-age), Warm: true}
	}
	ready := func(name string, age time.Duration) Runner {
		return Runner{Name: name, Created: now.Add(-age), Ready: true, ReadySince: now.Add(-age + time.Minute)}
	}
	busy := func(name string) Runner { r := ready(name, 5*time.Minute); r.Busy = true; return r }
	cases := []struct {
		name           string
		p              Policy
		d              Demand
		runners        []Runner
		wantStart      []string
		wantCreate     int
		wantCreateWarm int
		wantRemove     []Removal
	}{
		{name: "an empty pool fills its warm tier", p: p, wantCreateWarm: 2},
		{name: "a queued job starts the oldest warm VM and nothing is cloned for it; the tier refills",
			p: p, d: Demand{Queued: 1}, runners: []Runner{warm("w-new", time.Minute), warm("w-old", 2*time.Minute)},
			wantStart: []string{"w-old"}, wantCreateWarm: 1},
		{name: "more jobs than warm VMs: every warm VM starts, the rest are cloned",
			p: p, d: Demand{Queued: 3}, runners: []Runner{warm("w1", time.Minute), warm("w2", 2*time.Minute)},
			wantStart: []string{"w2", "w1"}, wantCreate: 1, wantCreateWarm: 1},
		{name: "no refill past maxReplicas: warm VMs count toward it",
			p: p, d: Demand{Queued: 2, Busy: 2}, runners: []Runner{busy("b1"), busy("b2"), warm("w1", time.Minute), warm("w2", 2*time.Minute)},
			wantStart: []string{"w2", "w1"}},
		{name: "a warm VM past warmMaxAge is recycled and replaced",
			p: p, runners: []Runner{warm("stale", 2*time.Hour), warm("fresh", time.Minute)},
			wantRemove: []Removal{{Name: "stale", Reason: ReasonWarmMaxAge}}, wantCreateWarm: 1},
		{name: "the bootstrap timeout does not apply to a VM never started",
			p: p, runners: []Runner{warm("w1", 50*time.Minute), warm("w2", 50*time.Minute)}},
		{name: "a lower maxReplicas removes warm VMs before idle runners",
			p: Policy{Max: 2, Idle: 2, Warm: 2}, runners: []Runner{ready("i1", time.Minute), ready("i2", time.Minute), warm("w1", time.Minute), warm("w2", 2*time.Minute)},
			wantRemove: []Removal{{Name: "w1", Reason: ReasonScaleDown}, {Name: "w2", Reason: ReasonScaleDown}}},
		{name: "a runner whose job is done is removed and not counted: the booting runner stays for the queued job",
			p: Policy{Max: 3}, d: Demand{Queued: 1, Busy: 1},
			runners:    []Runner{func() Runner { r := ready("done", time.Minute); r.Done = true; return r }(), busy("b"), {Name: "booting", Created: now}},
			wantRemove: []Removal{{Name: "done", Reason: ReasonJobDone}}},
		{name: "a done runner does not stand in for a new one",
			p: Policy{Max: 3}, d: Demand{Queued: 2},
			runners:    []Runner{func() Runner { r := ready("done", time.Minute); r.Done = true; return r }(), {Name: "booting", Created: now}},
			wantRemove: []Removal{{Name: "done", Reason: ReasonJobDone}}, wantCreate: 1},
		{name: "a lower warmReplicas removes the newest warm VM",
			p: Policy{Max: 4, Warm: 1}, runners: []Runner{warm("w1", time.Minute), warm("w2", 2*time.Minute)},
			wantRemove: []Removal{{Name: "w1", Reason: ReasonScaleDown}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := Decide(tc.p, tc.d, tc.runners, now)
			g.Expect(plan.Start).To(Equal(tc.wantStart))
			g.Expect(plan.Create).To(Equal(tc.wantCreate))
			g.Expect(plan.CreateWarm).To(Equal(tc.wantCreateWarm))
			g.Expect(plan.Remove).To(Equal(tc.wantRemove))
			g.Expect(len(tc.runners) - len(plan.Remove) + plan.Create + plan.CreateWarm).To(BeNumerically("<=", tc.p.Max))
		})
	}
}

// TestWarmTierStaysWithinMax drives a pool with a warm tier through generated demand, starts,
// jobs and completions: the runners that exist (warm VMs and those being deleted included) never
// exceed Max, a busy runner is never removed, and a warm VM is started before anything is cloned
// for a job.
func TestWarmTierStaysWithinMax(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := Policy{Max: rapid.IntRange(0, 8).Draw(rt, "max")}
		p.Warm = rapid.IntRange(0, p.Max).Draw(rt, "warm")
		p.Idle = rapid.IntRange(0, p.Max-p.Warm).Draw(rt, "idle")
		now, seq, queued := t0, 0, 0
		var runners []Runner
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("op", step)) {
			case 0:
				queued = rapid.IntRange(0, 2*p.Max+2).Draw(rt, fmt.Sprint("queued", step))
			case 1: // a started runner boots, or takes a job
				for i := range runners {
					r := &runners[i]
					if r.Deleting || r.Warm {
						continue
					}
					if !r.Ready {
						r.Ready, r.ReadySince = true, now
						break
					}
					if !r.Busy && queued > 0 {
						r.Busy, queued = true, queued-1
						break
					}
				}
			case 2: // a job finishes; a deletion completes
				for i := range runners {
					if runners[i].Busy && !runners[i].Deleting {
						runners[i].Busy, runners[i].Deleting = false, true
						break
					}
				}
				for i := range runners {
					if runners[i].Deleting {
						runners = append(runners[:i], runners[i+1:]...)
						break
					}
				}
			default:
				busy, warm := 0, 0
				for _, r := range runners {
					if r.Busy && !r.Deleting {
						busy++
					}
					if r.Warm && !r.Deleting {
						warm++
					}
				}
				plan := Decide(p, Demand{Queued: queued, Busy: busy}, runners, now)
				if plan.Create > 0 && len(plan.Start) < warm {
					rt.Fatalf("cloned %d while %d warm VMs stayed unstarted", plan.Create, warm-len(plan.Start))
				}
				gone := map[string]bool{}
				for _, rm := range plan.Remove {
					gone[rm.Name] = true
				}
				start := map[string]bool{}
				for _, name := range plan.Start {
					start[name] = true
				}
				for i := range runners {
					r := &runners[i]
					if gone[r.Name] {
						if r.Busy {
							rt.Fatalf("plan removed busy runner %s", r.Name)
						}
						r.Deleting = true
					}
					if start[r.Name] {
						r.Warm, r.Created = false, now
					}
				}
				for range plan.Create {
					seq++
					runners = append(runners, Runner{Name: fmt.Sprint("r", seq), Created: now})
				}
				for range plan.CreateWarm {
					seq++
					runners = append(runners, Runner{Name: fmt.Sprint("w", seq), Created: now, Warm: true})
				}
			}
			now = now.Add(time.Minute)
			if len(runners) > p.Max {
				rt.Fatalf("step %d: %d runners exist (warm and deleting included), max %d", step, len(runners), p.Max)
			}
		}
	})
}
