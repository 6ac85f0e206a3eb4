package capacity

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeClock drives a queue's time by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time       { return c.t }
func (c *fakeClock) step(d time.Duration) { c.t = c.t.Add(d) }
func newTestQueue(l Limits) (*Queue, *fakeClock) {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q := NewQueue(l)
	q.now = c.now
	return q, c
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func clone(key, pool, host, storage string, age int) Request {
	return Request{Key: key, Pool: pool, Op: OpClone, Host: host, Storage: storage, Created: t0.Add(time.Duration(age) * time.Second)}
}

func keys(gs []Grant) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.Key)
	}
	return out
}

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		reqs   []Request
		admit  []bool
	}{
		{"two clones per storage", Limits{TasksPerStorage: 2, ClonesPerHost: 4},
			[]Request{clone("a", "p", "n1", "s", 1), clone("b", "p", "n1", "s", 2), clone("c", "p", "n1", "s", 3)},
			[]bool{true, true, false}},
		{"another storage of the host is free", Limits{TasksPerStorage: 1, ClonesPerHost: 4},
			[]Request{clone("a", "p", "n1", "s1", 1), clone("b", "p", "n1", "s2", 2), clone("c", "p", "n1", "s1", 3)},
			[]bool{true, true, false}},
		{"host limit across storages", Limits{TasksPerStorage: 2, ClonesPerHost: 2},
			[]Request{clone("a", "p", "n1", "s1", 1), clone("b", "p", "n1", "s2", 2), clone("c", "p", "n1", "s3", 3), clone("d", "p", "n2", "s4", 4)},
			[]bool{true, true, false, true}},
		{"deletes are limited per host, apart from clones", Limits{TasksPerStorage: 1, ClonesPerHost: 1, DeletesPerHost: 1},
			[]Request{clone("a", "p", "n1", "s", 1), {Key: "b", Pool: "p", Op: OpDelete, Host: "n1"}, {Key: "c", Pool: "p", Op: OpDelete, Host: "n1"}},
			[]bool{true, true, false}},
		{"a delete takes its storage's slot as a clone does", Limits{TasksPerStorage: 2, ClonesPerHost: 4, DeletesPerHost: 4},
			[]Request{clone("a", "p", "n1", "s", 1), {Key: "b", Pool: "p", Op: OpDelete, Host: "n1", Storage: "s"}, clone("c", "p", "n1", "s", 3),
				{Key: "d", Pool: "p", Op: OpDelete, Host: "n1", Storage: "s"}, {Key: "e", Pool: "p", Op: OpDelete, Host: "n1", Storage: "s2"}},
			[]bool{true, true, false, false, true}},
		{"zero is unlimited", Limits{},
			[]Request{clone("a", "p", "n1", "s", 1), clone("b", "p", "n1", "s", 2), clone("c", "p", "n1", "s", 3)},
			[]bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q, _ := newTestQueue(tc.limits)
			for i, r := range tc.reqs {
				ok, _ := q.Acquire(r)
				g.Expect(ok).To(Equal(tc.admit[i]), "request %s", r.Key)
			}
		})
	}
}

func TestReleaseWakesRoundRobinAcrossPoolsOldestFirst(t *testing.T) {
	g := NewWithT(t)
	q, _ := newTestQueue(Limits{TasksPerStorage: 1})
	ok, _ := q.Acquire(clone("running", "a", "n", "s", 0))
	g.Expect(ok).To(BeTrue())
	// Pool a queues five, then pool b two: b is not made to wait behind all of a.
	for i := 5; i >= 1; i-- {
		ok, _ = q.Acquire(clone(fmt.Sprintf("a%d", i), "a", "n", "s", i))
		g.Expect(ok).To(BeFalse())
	}
	for i := 1; i <= 2; i++ {
		ok, _ = q.Acquire(clone(fmt.Sprintf("b%d", i), "b", "n", "s", 10+i))
		g.Expect(ok).To(BeFalse())
	}
	var order []string
	last := "running"
	for range 7 {
		gs := q.Release(last)
		g.Expect(gs).To(HaveLen(1))
		last = gs[0].Key
		order = append(order, last)
		// The woken claim comes back for its slot.
		ok, _ = q.Acquire(clone(last, "", "n", "s", 0))
		g.Expect(ok).To(BeTrue())
	}
	g.Expect(order).To(Equal([]string{"b1", "a1", "b2", "a2", "a3", "a4", "a5"}))
	g.Expect(q.Release(last)).To(BeEmpty())
}

func TestAcquireWhileOthersWaitTakesItsTurn(t *testing.T) {
	g := NewWithT(t)
	q, _ := newTestQueue(Limits{TasksPerStorage: 1})
	ok, _ := q.Acquire(clone("x", "a", "n", "s", 0))
	g.Expect(ok).To(BeTrue())
	ok, _ = q.Acquire(clone("old", "a", "n", "s", 1))
	g.Expect(ok).To(BeFalse())
	// The slot frees, but before the woken claim returns a newer one of the same pool asks.
	g.Expect(keys(q.Release("x"))).To(Equal([]string{"old"}))
	ok, _ = q.Acquire(clone("new", "a", "n", "s", 2))
	g.Expect(ok).To(BeFalse(), "the slot is the older claim's")
	ok, _ = q.Acquire(clone("old", "a", "n", "s", 1))
	g.Expect(ok).To(BeTrue())
}

func TestUnusedGrantExpires(t *testing.T) {
	g := NewWithT(t)
	q, clock := newTestQueue(Limits{TasksPerStorage: 1})
	q.Acquire(clone("x", "a", "n", "s", 0))
	q.Acquire(clone("gone", "a", "n", "s", 1))
	q.Acquire(clone("next", "a", "n", "s", 2))
	g.Expect(keys(q.Release("x"))).To(Equal([]string{"gone"}))
	// "gone" never comes back for its slot.
	clock.step(DefaultGrantTTL + time.Second)
	g.Expect(keys(q.Dispatch())).To(Equal([]string{"next"}))
}

func TestHoldCountsRunningTasks(t *testing.T) {
	g := NewWithT(t)
	q, _ := newTestQueue(Limits{TasksPerStorage: 2})
	q.Hold(clone("t1", "a", "n", "s", 0))
	q.Hold(clone("t2", "b", "n", "s", 0))
	ok, _ := q.Acquire(clone("c", "a", "n", "s", 1))
	g.Expect(ok).To(BeFalse(), "two tasks found running fill the storage")
	g.Expect(q.Stats().InFlight[OpClone]).To(Equal(2))
	g.Expect(q.Stats().Waiting[OpClone]).To(Equal(1))
	g.Expect(keys(q.Release("t1"))).To(Equal([]string{"c"}))
}

func TestSetLimitsAdmitsWaiting(t *testing.T) {
	g := NewWithT(t)
	q, _ := newTestQueue(Limits{TasksPerStorage: 1})
	q.Acquire(clone("a", "p", "n", "s", 0))
	q.Acquire(clone("b", "p", "n", "s", 1))
	g.Expect(keys(q.SetLimits(Limits{TasksPerStorage: 2}))).To(Equal([]string{"b"}))
}

func TestThrottleSlowsTheClusterOnce(t *testing.T) {
	g := NewWithT(t)
	q, clock := newTestQueue(Limits{TasksPerStorage: 1})
	first := q.Throttle()
	g.Expect(first).To(BeNumerically("~", ThrottleBase, ThrottleBase/5))
	// Ten claims meeting the same overload do not stack ten backoffs.
	for range 10 {
		g.Expect(q.Throttle()).To(BeNumerically("<=", first))
	}
	ok, _ := q.Acquire(clone("a", "p", "n", "s", 0))
	g.Expect(ok).To(BeFalse(), "nothing is admitted while throttled")
	clock.step(first)
	g.Expect(keys(q.Dispatch())).To(Equal([]string{"a"}))
	// A second overload right after doubles the wait; bounded by ThrottleMax.
	second := q.Throttle()
	g.Expect(second).To(BeNumerically("~", 2*ThrottleBase, 2*ThrottleBase/5))
	for range 20 {
		clock.step(ThrottleMax)
		g.Expect(q.Throttle()).To(BeNumerically("<=", ThrottleMax))
	}
	clock.step(ThrottleMax)
	q.Relieve()
	g.Expect(q.Throttle()).To(BeNumerically("~", ThrottleBase, ThrottleBase/5), "relief starts again from the base")
}

func TestCapacityLine(t *testing.T) {
	g := NewWithT(t)
	q, clock := newTestQueue(Limits{})
	recheck := 10 * time.Minute
	// Nobody waits: a claim tries.
	g.Expect(q.MayPlace(clone("a1", "a", "", "", 1), recheck)).To(BeTrue())
	q.NoCapacity(clone("a1", "a", "", "", 1))
	q.NoCapacity(clone("a2", "a", "", "", 2))
	// A newcomer does not jump the line.
	g.Expect(q.MayPlace(clone("b1", "b", "", "", 3), recheck)).To(BeFalse())
	g.Expect(q.WaitingForCapacity("b1")).To(BeTrue())
	g.Expect(q.Stats().WaitingForCapacity).To(Equal(map[string]int{"a": 2, "b": 1}))
	// A VM goes: the oldest of the pool next in turn tries; once placed it passes a try on.
	g.Expect(keys(q.CapacityFreed(1))).To(Equal([]string{"a1"}))
	g.Expect(q.MayPlace(clone("a2", "a", "", "", 2), recheck)).To(BeFalse(), "no try yet")
	g.Expect(q.MayPlace(clone("a1", "a", "", "", 1), recheck)).To(BeTrue())
	g.Expect(keys(q.Placed("a1"))).To(Equal([]string{"b1"}))
	g.Expect(q.MayPlace(clone("b1", "b", "", "", 3), recheck)).To(BeTrue())
	// b1 finds no room after all: it keeps its place and the chain stops.
	q.NoCapacity(clone("b1", "b", "", "", 3))
	// b has not found room yet, a has: b goes first.
	g.Expect(keys(q.CapacityFreed(2))).To(Equal([]string{"b1", "a2"}))
	// Without any wake-up a waiting claim still tries after recheck.
	q.Release("a2")
	q.Release("b1")
	q.NoCapacity(clone("c", "c", "", "", 5))
	g.Expect(q.MayPlace(clone("c", "c", "", "", 5), recheck)).To(BeFalse())
	clock.step(recheck)
	g.Expect(q.MayPlace(clone("c", "c", "", "", 5), recheck)).To(BeTrue())
}
