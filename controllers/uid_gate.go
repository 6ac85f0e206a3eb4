package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// uidGate remembers, per object UID, failures of an outside call and when the next may be made:
// a rate limit that holds however often the object's controller is woken (its own status writes,
// a burst's events). Memory only: a restarted manager forgets it and tries once more at once.
type uidGate struct {
	// delay is the wait after the nth consecutive failure.
	delay func(failures int32) time.Duration

	mu      sync.Mutex
	entries map[types.UID]gateEntry
}

type gateEntry struct {
	failures int32
	next     time.Time
}

// wait is how long to wait before calling again for uid; 0 when the call may be made now.
func (g *uidGate) wait(uid types.UID, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.entries[uid]
	if !ok || !now.Before(e.next) {
		return 0
	}
	return e.next.Sub(now)
}

// failed records a failed call for uid and returns the wait before the next.
func (g *uidGate) failed(uid types.UID, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.entries == nil {
		g.entries = map[types.UID]gateEntry{}
	}
	for k, e := range g.entries { // objects deleted since do not linger
		if now.Sub(e.next) > time.Hour {
			delete(g.entries, k)
		}
	}
	e := g.entries[uid]
	e.failures++
	d := g.delay(e.failures)
	e.next = now.Add(d)
	g.entries[uid] = e
	return d
}

// forget drops what was recorded for uid once its call went through.
func (g *uidGate) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, uid)
}

// deregisterDelay backs off a runner's deregistration after the CI platform failed it (other
// than by its rate limit, which the pool's status carries): 5 s, doubling up to 5 minutes. Without
// it every event of the pool called the platform again for each runner it was removing, for as
// long as the platform failed.
func deregisterDelay(failures int32) time.Duration { return backoff(failures) }

// placementDelay spaces the placements of a persistent claim no host fits (see
// noHostFitsMinInterval).
func placementDelay(int32) time.Duration { return noHostFitsMinInterval }
