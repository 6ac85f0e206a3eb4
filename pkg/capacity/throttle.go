package capacity

import (
	"math/rand/v2"
	"time"
)

// Bounds of the cluster-wide backoff after a lock timeout or a refused call.
const (
	ThrottleBase = 2 * time.Second
	ThrottleMax  = time.Minute
)

// throttle is one cluster's backoff: while active no slot is granted, and claims wait it out
// instead of calling the hypervisor.
type throttle struct {
	until time.Time
	level int
}

func (t *throttle) active(now time.Time) bool { return now.Before(t.until) }

// Throttle records that the hypervisor refused work (a lock timeout, a refused or overloaded
// call) and returns how long the whole cluster now waits. Reports that arrive while the cluster
// already waits, from calls made before it began to, do not lengthen the wait: one overload
// slows the queue once, not once per claim that met it.
func (q *Queue) Throttle() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	t := &q.throttle
	if t.active(now) {
		return t.until.Sub(now)
	}
	d := ThrottleBase << min(t.level, 10)
	// ±20% jitter, so claims of several clusters, or several managers, do not return in step.
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	d = min(d, ThrottleMax)
	t.until = now.Add(d)
	t.level++
	return d
}

// Relieve records a call the hypervisor accepted after the wait: the next overload starts the
// backoff from its base again.
func (q *Queue) Relieve() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.throttle.active(q.now()) {
		q.throttle.level = 0
	}
}

// ThrottledFor is how much longer the cluster waits; zero when it does not.
func (q *Queue) ThrottledFor() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(q.throttle.until.Sub(q.now()), 0)
}
