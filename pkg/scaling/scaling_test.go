package scaling

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
	. "github.com/onsi/gomega"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestDesiredReplicas(t *testing.T) {
	cases := []struct {
		name        string
		p           Policy
		d           Demand
		want        int
		wantLimited bool
	}{
		{"floor when idle", Policy{Min: 1, Max: 5}, Demand{}, 1, false},
		{"busy plus queued plus idle", Policy{Min: 0, Max: 10, Idle: 2}, Demand{Queued: 3, Busy: 1}, 6, false},
		{"clamped to max", Policy{Min: 0, Max: 5}, Demand{Queued: 20}, 5, true},
		{"explicit replicas win", Policy{Min: 0, Max: 5, Replicas: ptr(3)}, Demand{Queued: 20}, 3, false},
		{"explicit replicas clamped", Policy{Min: 2, Max: 5, Replicas: ptr(0)}, Demand{}, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, limited := DesiredReplicas(tc.p, tc.d)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(limited).To(Equal(tc.wantLimited))
		})
	}
}

func TestDecide(t *testing.T) {
	p := Policy{Min: 1, Max: 5, IdleTTL: 30 * time.Minute, MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
	now := t0.Add(48 * time.Hour)
	ready := func(name string, age time.Duration) Runner {
		return Runner{Name: name, Created: now.Add(-age), Ready: true, ReadySince: now.Add(-age + time.Minute)}
	}
	booting := func(name string, age time.Duration) Runner { return Runner{Name: name, Created: now.Add(-age)} }
	busy := func(name string, age time.Duration) Runner { r := ready(name, age); r.Busy = true; return r }
	cases := []struct {
		name       string
		d          Demand
		runners    []Runner
		wantCreate int
		wantRemove []Removal
	}{
		{name: "grow for queued jobs", d: Demand{Queued: 3}, runners: []Runner{ready("a", time.Minute)}, wantCreate: 2},
		{name: "shrink removes booting newest first, never busy",
			d:          Demand{Busy: 1, Queued: 1},
			runners:    []Runner{busy("b", 5*time.Minute), booting("old", 3*time.Minute), booting("new", time.Minute), ready("r", 2*time.Minute)},
			wantRemove: []Removal{{Name: "new", Reason: ReasonScaleDown}, {Name: "old", Reason: ReasonScaleDown}}},
		{name: "all busy above desired: nothing removed", d: Demand{},
			runners: []Runner{busy("a", time.Minute), busy("b", time.Minute)}},
		{name: "unhealthy replaced", d: Demand{},
			runners:    []Runner{{Name: "sick", Created: now.Add(-time.Minute), Unhealthy: true}},
			wantCreate: 1, wantRemove: []Removal{{Name: "sick", Reason: ReasonUnhealthy}}},
		{name: "idle TTL replaced", d: Demand{},
			runners:    []Runner{ready("stale", time.Hour)},
			wantCreate: 1, wantRemove: []Removal{{Name: "stale", Reason: ReasonIdleTTL}}},
		{name: "max lifetime replaced even when busy", d: Demand{Busy: 1},
			runners:    []Runner{busy("ancient", 25*time.Hour)},
			wantCreate: 1, wantRemove: []Removal{{Name: "ancient", Reason: ReasonMaxLifetime}}},
		{name: "never bootstrapped removed", d: Demand{},
			runners:    []Runner{booting("stuck", 11*time.Minute)},
			wantCreate: 1, wantRemove: []Removal{{Name: "stuck", Reason: ReasonBootstrapTimeout}}},
		{name: "a runner waiting in the hypervisor's queue is not timed out, however long it waits", d: Demand{Queued: 1},
			runners: []Runner{{Name: "queued", Created: now.Add(-time.Hour), Queued: true}}},
		{name: "the bootstrap timeout counts from the clone, not from creation", d: Demand{Queued: 2},
			runners: []Runner{{Name: "cloned-late", Created: now.Add(-time.Hour), BootingSince: now.Add(-5 * time.Minute)},
				{Name: "cloned-early", Created: now.Add(-time.Hour), BootingSince: now.Add(-11 * time.Minute)}},
			wantCreate: 1, wantRemove: []Removal{{Name: "cloned-early", Reason: ReasonBootstrapTimeout}}},
		{name: "deleting runners do not count toward the desired size", d: Demand{},
			runners:    []Runner{{Name: "going", Deleting: true}},
			wantCreate: 1},
		{name: "deleting runners count toward max: failing destroys never grow the pool past it", d: Demand{Queued: 9},
			runners:    []Runner{{Name: "stuck1", Deleting: true}, {Name: "stuck2", Deleting: true}, ready("r", time.Minute)},
			wantCreate: 2},
		{name: "all places held by deletions: nothing created", d: Demand{Queued: 9},
			runners: []Runner{{Name: "s1", Deleting: true}, {Name: "s2", Deleting: true}, {Name: "s3", Deleting: true},
				{Name: "s4", Deleting: true}, {Name: "s5", Deleting: true}}},
		{name: "idle runner on a host in maintenance replaced", d: Demand{},
			runners:    []Runner{func() Runner { r := ready("draining", time.Minute); r.HostMaintenance = true; return r }()},
			wantCreate: 1, wantRemove: []Removal{{Name: "draining", Reason: ReasonHostMaintenance}}},
		{name: "busy runner on a host in maintenance finishes its job", d: Demand{Busy: 1},
			runners: []Runner{func() Runner { r := busy("working", time.Minute); r.HostMaintenance = true; return r }()}},
		{name: "a replacement at max waits for the removal", d: Demand{Busy: 4, Queued: 1},
			runners: []Runner{busy("b1", time.Minute), busy("b2", time.Minute), busy("b3", time.Minute), busy("b4", time.Minute),
				{Name: "sick", Created: now.Add(-time.Minute), Unhealthy: true}},
			wantRemove: []Removal{{Name: "sick", Reason: ReasonUnhealthy}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := Decide(p, tc.d, tc.runners, now)
			g.Expect(plan.Create).To(Equal(tc.wantCreate))
			g.Expect(plan.Remove).To(Equal(tc.wantRemove))
		})
	}
}

// TestHeldRunnerKeepsItsPlace: a runner the sweep marked (its VM seen stopped) that the CI
// platform still reports busy stays until its job ends. Until then it holds its place: it counts
// toward the desired size and maxReplicas, so the pool neither starts a replacement beside it nor
// keeps an idle runner too many.
func TestHeldRunnerKeepsItsPlace(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	idle := func(name string) Runner {
		return Runner{Name: name, Created: now.Add(-time.Hour), Ready: true, ReadySince: now.Add(-time.Minute)}
	}
	busy := func(name string) Runner { r := idle(name); r.Busy = true; return r }
	held := func(name string) Runner { r := busy(name); r.Unhealthy, r.VMStopped = true, true; return r }
	heldRemoval := Removal{Name: "marked", Reason: ReasonUnhealthy, Held: true}
	cases := []struct {
		name       string
		p          Policy
		d          Demand
		runners    []Runner
		wantCreate int
		wantRemove []Removal
	}{
		{name: "its place is not filled beside it", p: Policy{Max: 5, Idle: 1}, d: Demand{Busy: 1},
			runners: []Runner{held("marked"), idle("i1")}, wantRemove: []Removal{heldRemoval}},
		{name: "an idle runner beyond the desired size is scaled down", p: Policy{Max: 5, Idle: 1}, d: Demand{Busy: 1},
			runners:    []Runner{held("marked"), idle("i1"), idle("i2")},
			wantRemove: []Removal{heldRemoval, {Name: "i1", Reason: ReasonScaleDown}}},
		{name: "maxReplicas lowered below the pool: the held runner counts toward it", p: Policy{Max: 2, Idle: 1}, d: Demand{Busy: 2},
			runners:    []Runner{held("marked"), busy("b1"), idle("i1")},
			wantRemove: []Removal{heldRemoval, {Name: "i1", Reason: ReasonScaleDown}}},
		{name: "at maxReplicas a queued job waits", p: Policy{Max: 3}, d: Demand{Busy: 3, Queued: 2},
			runners: []Runner{held("marked"), busy("b1"), busy("b2")}, wantRemove: []Removal{heldRemoval}},
		{name: "below maxReplicas a queued job gets the free place", p: Policy{Max: 3}, d: Demand{Busy: 2, Queued: 2},
			runners: []Runner{held("marked"), busy("b1")}, wantCreate: 1, wantRemove: []Removal{heldRemoval}},
		{name: "once its job ended it is an ordinary replacement", p: Policy{Max: 3}, d: Demand{Busy: 1},
			runners:    []Runner{{Name: "marked", Created: now.Add(-time.Hour), Ready: true, Unhealthy: true, VMStopped: true}, busy("b1")},
			wantCreate: 0, wantRemove: []Removal{{Name: "marked", Reason: ReasonUnhealthy}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := Decide(tc.p, tc.d, tc.runners, now)
			g.Expect(plan.Create).To(Equal(tc.wantCreate))
			g.Expect(plan.Remove).To(Equal(tc.wantRemove))
		})
	}
}

// TestCreateIfKept: a runner to be replaced that the CI platform turns out to keep (the pool's
// demand did not know its job) holds its place: the pool makes one runner fewer, but fills a
// place maxReplicas leaves free instead of counting the kept runner twice.
func TestCreateIfKept(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	marked := Runner{Name: "marked", Created: now.Add(-time.Hour), Ready: true, Unhealthy: true, VMStopped: true}
	cases := []struct {
		name       string
		p          Policy
		kept       int
		wantCreate int
	}{
		{name: "at maxReplicas the free place is filled", p: Policy{Min: 2, Max: 2}, kept: 1, wantCreate: 1},
		{name: "below maxReplicas the desired size counts it", p: Policy{Min: 2, Max: 5}, kept: 1, wantCreate: 1},
		{name: "removed after all: replaced", p: Policy{Min: 2, Max: 5}, kept: 0, wantCreate: 2},
		{name: "no room at all", p: Policy{Min: 2, Max: 1}, kept: 1, wantCreate: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := Decide(tc.p, Demand{}, []Runner{marked}, now)
			g.Expect(plan.Remove).To(Equal([]Removal{{Name: "marked", Reason: ReasonUnhealthy}}))
			g.Expect(plan.CreateIfKept(tc.kept)).To(Equal(tc.wantCreate))
			g.Expect(1+plan.CreateIfKept(tc.kept)).To(BeNumerically("<=", max(tc.p.Max, 1)), "never past maxReplicas")
		})
	}
}

// TestPoolAtMaxWithHeldRunner plays a pool at maxReplicas through bounded rounds: a busy runner is
// marked by the sweep and held while its job runs; the pool applies each plan (removals that are
// not held go, creations start idle) while jobs come and go, and lowers maxReplicas once. The pool
// never has more Machines than maxReplicas (busy runners aside, which are never scaled down), nor
// more than it wants.
func TestPoolAtMaxWithHeldRunner(t *testing.T) {
	g := NewWithT(t)
	now := t0
	p := Policy{Min: 1, Max: 4, Idle: 1}
	type machine struct {
		r       Runner
		jobLeft int // rounds until its job ends; 0 = idle
	}
	ms := map[string]*machine{}
	add := func(name string, job int) {
		ms[name] = &machine{r: Runner{Name: name, Created: now, Ready: true, ReadySince: now}, jobLeft: job}
	}
	add("marked", 6)
	add("b1", 3)
	add("b2", 9)
	add("i1", 0)
	ms["marked"].r.Unhealthy, ms["marked"].r.VMStopped = true, true
	next, queued := 0, 0
	for round := 0; round < 12; round++ {
		if round == 4 {
			p.Max = 3
		}
		if round%3 == 1 {
			queued += 2
		}
		// Idle runners take queued jobs.
		for _, m := range ms {
			if m.jobLeft == 0 && !m.r.Unhealthy && queued > 0 {
				m.jobLeft, queued = 4, queued-1
			}
		}
		var runners []Runner
		busy := 0
		for _, m := range ms {
			m.r.Busy = m.jobLeft > 0
			if m.r.Busy {
				busy++
			}
			runners = append(runners, m.r)
		}
		plan := Decide(p, Demand{Busy: busy, Queued: queued}, runners, now)
		for _, rm := range plan.Remove {
			if rm.Held && ms[rm.Name].jobLeft > 0 {
				continue // the CI platform says its job runs: kept
			}
			delete(ms, rm.Name)
		}
		for i := 0; i < plan.Create; i++ {
			next++
			add(fmt.Sprintf("n%d", next), 0)
		}
		// Busy runners are never scaled down, so after maxReplicas is lowered they may hold more
		// places than it for a while; nothing else may.
		g.Expect(len(ms)).To(BeNumerically("<=", max(p.Max, busy)), "round %d: %d Machines, maxReplicas %d, %d busy", round, len(ms), p.Max, busy)
		g.Expect(len(ms)).To(BeNumerically("<=", max(plan.Desired, busy)), "round %d: more Machines than the pool wants", round)
		for _, m := range ms {
			if m.jobLeft > 0 {
				m.jobLeft--
			}
		}
		now = now.Add(time.Minute)
	}
}

// TestDecideRecheck: the plan says when the first timeout of the runners it keeps falls due, and
// deciding again at that moment replaces the runner.
func TestDecideRecheck(t *testing.T) {
	p := Policy{Min: 1, Max: 5, IdleTTL: 30 * time.Minute, MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
	now := t0.Add(48 * time.Hour)
	for _, tc := range []struct {
		name   string
		runner Runner
		want   time.Duration
		reason Reason
	}{
		{"booting: its bootstrap timeout", Runner{Name: "b", Created: now.Add(-4 * time.Minute)}, 6 * time.Minute, ReasonBootstrapTimeout},
		{"idle: its idle TTL", Runner{Name: "i", Created: now.Add(-time.Hour), Ready: true, ReadySince: now.Add(-20 * time.Minute)},
			10 * time.Minute, ReasonIdleTTL},
		{"busy: only its lifetime", Runner{Name: "j", Created: now.Add(-23 * time.Hour), Ready: true, ReadySince: now.Add(-time.Hour), Busy: true},
			time.Hour, ReasonMaxLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := Decide(p, Demand{Busy: 1}, []Runner{tc.runner}, now)
			g.Expect(plan.Remove).To(BeEmpty())
			g.Expect(plan.Recheck).To(BeNumerically("~", tc.want, 10*time.Millisecond))
			later := Decide(p, Demand{Busy: 1}, []Runner{tc.runner}, now.Add(plan.Recheck))
			g.Expect(later.Remove).To(ConsistOf(Removal{Name: tc.runner.Name, Reason: tc.reason}), "due means due")
		})
	}
	g := NewWithT(t)
	g.Expect(Decide(Policy{Min: 1, Max: 5}, Demand{}, []Runner{{Name: "a", Created: now}}, now).Recheck).To(BeZero(), "no timeout armed")
}

// TestDecideProperties checks the pool invariants over random pools: bounds hold, busy runners are
// never scaled down, and applying a plan reaches the desired size whenever idle runners allow it.
func TestDecideProperties(t *testing.T) {
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 500
	params.Rng.Seed(42)
	properties := gopter.NewProperties(params)
	now := t0.Add(48 * time.Hour)

	genRunners := gen.SliceOf(gen.Struct(reflect.TypeOf(genRunner{}), map[string]gopter.Gen{
		"Ready":     gen.Bool(),
		"Busy":      gen.Bool(),
		"Deleting":  gen.Weighted([]gen.WeightedGen{{Weight: 9, Gen: gen.Const(false)}, {Weight: 1, Gen: gen.Const(true)}}),
		"Unhealthy": gen.Weighted([]gen.WeightedGen{{Weight: 9, Gen: gen.Const(false)}, {Weight: 1, Gen: gen.Const(true)}}),
		"VMStopped": gen.Weighted([]gen.WeightedGen{{Weight: 8, Gen: gen.Const(false)}, {Weight: 2, Gen: gen.Const(true)}}),
		"AgeMin":    gen.IntRange(0, 3000),
	}))

	properties.Property("plans respect bounds, count deleting and held runners toward max and never scale down busy runners", prop.ForAll(
		func(min, span, idle, queued int, rs []genRunner) bool {
			p := Policy{Min: min, Max: min + span, Idle: idle, IdleTTL: 30 * time.Minute,
				MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
			runners, busy := toRunners(rs, now)
			plan := Decide(p, Demand{Queued: queued, Busy: busy}, runners, now)
			if plan.Desired < p.Min || plan.Desired > p.Max {
				return fail(t, fmt.Sprintf("desired %d outside [%d,%d]", plan.Desired, p.Min, p.Max))
			}
			byName := map[string]Runner{}
			for _, r := range runners {
				byName[r.Name] = r
			}
			removed := map[string]bool{}
			scaleDowns := 0
			for _, rm := range plan.Remove {
				r := byName[rm.Name]
				if removed[rm.Name] || r.Deleting {
					return fail(t, "removed a runner twice or one already deleting: "+rm.Name)
				}
				if rm.Held != (r.Busy && r.VMStopped) {
					return fail(t, "held must be exactly the busy runners the sweep marked: "+rm.Name)
				}
				// A held runner stays while its job runs (the platform says busy): it is still
				// there after the plan.
				removed[rm.Name] = !rm.Held
				if rm.Reason == ReasonScaleDown {
					scaleDowns++
					if r.Busy {
						return fail(t, "scale-down removed busy runner "+rm.Name)
					}
				}
			}
			if plan.Create > 0 && scaleDowns > 0 {
				return fail(t, "created and scaled down at once")
			}
			after := plan.Create
			busyLeft := 0
			for _, r := range runners {
				if !r.Deleting && !removed[r.Name] {
					after++
					if r.Busy {
						busyLeft++
					}
				}
			}
			if plan.Create > 0 && len(runners)+plan.Create > p.Max {
				return fail(t, fmt.Sprintf("%d runners exist (deleting included), %d created: over max %d", len(runners), plan.Create, p.Max))
			}
			capped := plan.Create == max(0, p.Max-len(runners))
			if after != plan.Desired && !(after > plan.Desired && after == busyLeft) && !(after < plan.Desired && capped && plan.Limited) {
				return fail(t, fmt.Sprintf("after plan %d runners, desired %d (busy left %d)", after, plan.Desired, busyLeft))
			}
			return true
		},
		gen.IntRange(0, 5), gen.IntRange(0, 20), gen.IntRange(0, 5), gen.IntRange(0, 40), genRunners,
	))
	properties.TestingRun(t)
}

type genRunner struct {
	Ready, Busy, Deleting, Unhealthy, VMStopped bool
	AgeMin                                      int
}

func fail(t *testing.T, msg string) bool {
	t.Log(msg)
	return false
}

func toRunners(rs []genRunner, now time.Time) ([]Runner, int) {
	out := make([]Runner, len(rs))
	busy := 0
	for i, g := range rs {
		created := now.Add(-time.Duration(g.AgeMin) * time.Minute)
		out[i] = Runner{Name: fmt.Sprintf("r%d", i), Created: created, Ready: g.Ready || g.Busy, Busy: g.Busy,
			Deleting: g.Deleting, Unhealthy: g.Unhealthy || g.VMStopped, VMStopped: g.VMStopped}
		if out[i].Ready {
			out[i].ReadySince = created.Add(time.Minute)
		}
		if g.Busy && !g.Deleting {
			busy++
		}
	}
	return out, busy
}

func ptr(i int) *int { return &i }
