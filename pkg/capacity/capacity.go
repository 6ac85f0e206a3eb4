package capacity

import (
	"slices"
	"time"
)

// capacityLine is the line of claims no host has the memory for. It is woken by capacity
// freeing, not polled: a freed VM gives the next claim in line (fair across pools, oldest first)
// a try, and a claim that finds room passes a try on, since room may be left for the next.
type capacityLine struct {
	waiting map[string]capWaiter
	tries   map[string]time.Time
	turns   turns
}

type capWaiter struct {
	req     Request
	since   time.Time
	lastTry time.Time
}

func newCapacityLine() capacityLine {
	return capacityLine{waiting: map[string]capWaiter{}, tries: map[string]time.Time{}}
}

// MayPlace reports whether req may look for a host now: when nobody waits for capacity, when it
// holds a try, or when it last tried recheck ago or more (the fallback when no wake-up comes).
// Otherwise it joins the line behind the claims already waiting.
func (q *Queue) MayPlace(req Request, recheck time.Duration) bool {
	may, _ := q.MayPlaceAfterWait(req, recheck)
	return may
}

// MayPlaceAfterWait is MayPlace that also reports whether req comes from the capacity line (a
// try or a recheck): its caller should then look at the hosts afresh, since room freed after
// any listing it may hold.
func (q *Queue) MayPlaceAfterWait(req Request, recheck time.Duration) (may, waited bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := &q.capacity
	now := q.now()
	q.expireTries(now)
	if _, ok := c.tries[req.Key]; ok {
		delete(c.tries, req.Key)
		return true, true
	}
	w, waiting := c.waiting[req.Key]
	switch {
	case !waiting && len(c.waiting) == 0:
		return true, false
	case !waiting:
		c.waiting[req.Key] = capWaiter{req: req, since: now, lastTry: now}
		return false, false
	case recheck > 0 && now.Sub(w.lastTry) >= recheck:
		return true, true
	}
	return false, false
}

// NoCapacity records that req found no host with room: it waits in line, keeping its place.
func (q *Queue) NoCapacity(req Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := &q.capacity
	now := q.now()
	w, ok := c.waiting[req.Key]
	if !ok {
		w.since = now
	}
	w.req, w.lastTry = req, now
	c.waiting[req.Key] = w
	delete(c.tries, req.Key)
}

// WaitingForCapacity reports whether key is in the capacity line.
func (q *Queue) WaitingForCapacity(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.capacity.waiting[key]
	return ok
}

// Placed takes key out of the capacity line once it found a host and, as room may be left,
// gives the next claim in line a try. It returns the claims to wake.
func (q *Queue) Placed(key string) []Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := &q.capacity
	w, waited := c.waiting[key]
	delete(c.waiting, key)
	delete(c.tries, key)
	if !waited {
		return nil
	}
	// Only a claim that found room uses up its pool's turn: a try that finds none leaves the
	// pool first in line.
	c.turns.served(w.req.Pool)
	return q.nextTries(1)
}

// CapacityFreed gives the next n claims in line a try (a VM of the cluster was destroyed, or
// the hosts report more free memory) and returns them, to be woken.
func (q *Queue) CapacityFreed(n int) []Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nextTries(n)
}

func (q *Queue) expireTries(now time.Time) {
	for k, at := range q.capacity.tries {
		if now.Sub(at) > q.grantTTL {
			delete(q.capacity.tries, k)
		}
	}
}

// nextTries hands out n tries round robin across pools (the pool whose claim last found room
// longest ago first), oldest first within a pool, skipping claims that hold one already.
func (q *Queue) nextTries(n int) []Grant {
	c := &q.capacity
	now := q.now()
	q.expireTries(now)
	byPool := map[string][]capWaiter{}
	for k, w := range c.waiting {
		if _, ok := c.tries[k]; !ok {
			byPool[w.req.Pool] = append(byPool[w.req.Pool], w)
		}
	}
	for _, ws := range byPool {
		slices.SortFunc(ws, func(a, b capWaiter) int { return olderFirst(waiter{req: a.req}, waiter{req: b.req}) })
	}
	var grants []Grant
	for len(grants) < n && len(byPool) > 0 {
		for _, p := range inTurn(&c.turns, byPool) {
			if len(grants) == n {
				break
			}
			w := byPool[p][0]
			if byPool[p] = byPool[p][1:]; len(byPool[p]) == 0 {
				delete(byPool, p)
			}
			c.tries[w.req.Key] = now
			grants = append(grants, Grant{Key: w.req.Key, Op: OpCapacity, Waited: now.Sub(w.since)})
		}
	}
	return grants
}
