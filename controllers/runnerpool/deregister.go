package runnerpool

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperfleet-io/hyperfleet/controllers/requeue"
)

// deregisterBackoff remembers, per Machine, the deregistrations the CI platform failed (other than
// by its rate limit, which the pool's status carries): the next call waits 5 s, doubling up to
// 5 minutes. Without it every event of the pool (a thousand runners' status changes in a burst)
// called the platform again for each runner it was removing, for as long as the platform failed.
type deregisterBackoff struct {
	mu      sync.Mutex
	entries map[types.UID]deregisterFailure
}

type deregisterFailure struct {
	failures int32
	next     time.Time
}

// wait is how long to wait before deregistering the Machine uid again; 0 when it may now.
func (b *deregisterBackoff) wait(uid types.UID, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[uid]
	if !ok || !now.Before(e.next) {
		return 0
	}
	return e.next.Sub(now)
}

// failed records a failed deregistration and returns the wait before the next.
func (b *deregisterBackoff) failed(uid types.UID, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries == nil {
		b.entries = map[types.UID]deregisterFailure{}
	}
	for k, e := range b.entries { // Machines deleted since do not linger
		if now.Sub(e.next) > time.Hour {
			delete(b.entries, k)
		}
	}
	e := b.entries[uid]
	e.failures++
	d := requeue.Backoff(e.failures)
	e.next = now.Add(d)
	b.entries[uid] = e
	return d
}

// forget drops what was recorded for uid once its deregistration went through.
func (b *deregisterBackoff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, uid)
}
