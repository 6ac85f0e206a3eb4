package capacity

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Operation is what a slot is taken for.
type Operation string

const (
	// OpClone is a clone task: it holds a slot of its host and one of its storage.
	OpClone Operation = "clone"
	// OpDelete is a stop-and-destroy: it holds a slot of its host and, when it names one, of the
	// storage its disks are on (a destroy takes the same storage lock as a clone).
	OpDelete Operation = "delete"
	// OpCapacity is a place in the capacity line, which holds no slot.
	OpCapacity Operation = "capacity"
)

// Limits bound the operations a cluster runs at once. Zero or less means no limit.
type Limits struct {
	ClonesPerHost int
	// TasksPerStorage bounds clones and deletes together on one storage: the hypervisor takes
	// the storage's lock for both, so a clone queued behind deletes times out like one queued
	// behind clones.
	TasksPerStorage int
	DeletesPerHost  int
}

// Request is one claim asking for a slot.
type Request struct {
	// Key identifies the claim (namespace/name); one claim holds at most one slot.
	Key string
	// Pool is the fairness group: the owning pool, or the namespace of a standalone claim.
	Pool string
	Op   Operation
	Host string
	// Storage names the storage a clone or a delete locks, unique within the cluster (e.g.
	// "node/local-lvm"); empty for a delete whose storage is not known.
	Storage string
	// Created orders requests within a pool, oldest first (the claim's creation time).
	Created time.Time
}

// Grant is a request that has just been given a slot, and how long it waited for it.
type Grant struct {
	Key    string
	Op     Operation
	Waited time.Duration
}

// DefaultGrantTTL is how long a slot granted to a waiting claim is kept for it: a claim woken
// but gone (deleted, moved) must not hold the slot for ever.
const DefaultGrantTTL = 30 * time.Second

type waiter struct {
	req   Request
	since time.Time
}

type held struct {
	req       Request
	grantedAt time.Time
	// used is set once the holder came back for its slot; only unused grants expire.
	used bool
}

// Queue hands out one hypervisor cluster's slots. It is safe for concurrent use.
type Queue struct {
	mu       sync.Mutex
	limits   Limits
	now      func() time.Time
	grantTTL time.Duration
	waiting  map[string]waiter
	held     map[string]held
	// turns orders the pools: the one served longest ago (or never) is asked first.
	turns    turns
	throttle throttle
	capacity capacityLine
}

// NewQueue returns an empty queue with limits.
func NewQueue(limits Limits) *Queue {
	return &Queue{limits: limits, now: time.Now, grantTTL: DefaultGrantTTL,
		waiting: map[string]waiter{}, held: map[string]held{}, capacity: newCapacityLine()}
}

// SetLimits changes the limits; slots already held are kept even where they now exceed them.
// It returns the requests the new limits admit.
func (q *Queue) SetLimits(l Limits) []Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = l
	return q.dispatch()
}

// Limits returns the limits in effect.
func (q *Queue) Limits() Limits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limits
}

// Acquire asks for a slot for req. It reports whether req holds one (already, or now); if not,
// req waits in line and is among the grants a later Release returns when its turn comes. The
// other grants it returns are requests admitted by the same pass, to be woken by the caller.
func (q *Queue) Acquire(req Request) (ok bool, woken []Grant) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h, found := q.held[req.Key]; found && h.req.Op == req.Op {
		h.used = true
		q.held[req.Key] = h
		return true, nil
	} else if found {
		// The claim moved on to another operation: its old slot is free.
		delete(q.held, req.Key)
	}
	w, found := q.waiting[req.Key]
	if !found {
		w.since = q.now()
	}
	w.req = req
	q.waiting[req.Key] = w
	for _, g := range q.dispatch() {
		if g.Key == req.Key {
			h := q.held[req.Key]
			h.used = true
			q.held[req.Key] = h
			ok = true
			continue
		}
		woken = append(woken, g)
	}
	return ok, woken
}

// Hold records a slot as taken whatever the limits: a task found running (e.g. after a restart)
// holds its slot until it ends.
func (q *Queue) Hold(req Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.waiting, req.Key)
	q.held[req.Key] = held{req: req, grantedAt: q.now(), used: true}
}

// Holds reports whether key holds a slot for op and has come for it: a slot granted to a claim
// that has not yet been woken is not its yet to give back.
func (q *Queue) Holds(key string, op Operation) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	h, ok := q.held[key]
	return ok && h.used && h.req.Op == op
}

// Release gives back key's slot and its places in line (for a slot or for capacity), if any,
// and returns the requests now admitted, to be woken.
func (q *Queue) Release(key string) []Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.capacity.waiting, key)
	delete(q.capacity.tries, key)
	_, wasHeld := q.held[key]
	_, wasWaiting := q.waiting[key]
	delete(q.held, key)
	delete(q.waiting, key)
	if !wasHeld && !wasWaiting {
		return nil
	}
	return q.dispatch()
}

// Dispatch admits whatever the limits allow now (e.g. once a throttle has passed) and returns it.
func (q *Queue) Dispatch() []Grant {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dispatch()
}

// Stats is a snapshot of the queue for metrics and status.
type Stats struct {
	Waiting  map[Operation]int
	InFlight map[Operation]int
	// WaitingForCapacity counts the claims waiting for memory, by pool.
	WaitingForCapacity map[string]int
}

// Stats returns the queue's counts.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{Waiting: map[Operation]int{OpClone: 0, OpDelete: 0}, InFlight: map[Operation]int{OpClone: 0, OpDelete: 0},
		WaitingForCapacity: map[string]int{}}
	for _, w := range q.waiting {
		s.Waiting[w.req.Op]++
	}
	for _, h := range q.held {
		s.InFlight[h.req.Op]++
	}
	for _, w := range q.capacity.waiting {
		s.WaitingForCapacity[w.req.Pool]++
	}
	return s
}

// usage counts the slots in use per host and storage.
type usage struct {
	clonesOnHost, tasksOnStorage, deletesOnHost map[string]int
}

func (q *Queue) usage() usage {
	u := usage{clonesOnHost: map[string]int{}, tasksOnStorage: map[string]int{}, deletesOnHost: map[string]int{}}
	for _, h := range q.held {
		u.add(h.req)
	}
	return u
}

func (u usage) add(r Request) {
	switch r.Op {
	case OpClone:
		u.clonesOnHost[r.Host]++
		u.tasksOnStorage[r.Storage]++
	case OpDelete:
		u.deletesOnHost[r.Host]++
		if r.Storage != "" {
			u.tasksOnStorage[r.Storage]++
		}
	}
}

func under(n, limit int) bool { return limit <= 0 || n < limit }

func (q *Queue) fits(u usage, r Request) bool {
	switch r.Op {
	case OpClone:
		return under(u.clonesOnHost[r.Host], q.limits.ClonesPerHost) && under(u.tasksOnStorage[r.Storage], q.limits.TasksPerStorage)
	case OpDelete:
		return under(u.deletesOnHost[r.Host], q.limits.DeletesPerHost) &&
			(r.Storage == "" || under(u.tasksOnStorage[r.Storage], q.limits.TasksPerStorage))
	}
	return true
}

// dispatch grants slots round robin across pools, each pool's oldest request that fits in
// turn; it stops when no waiting request fits or the cluster is throttled.
func (q *Queue) dispatch() []Grant {
	now := q.now()
	for k, h := range q.held {
		if !h.used && now.Sub(h.grantedAt) > q.grantTTL {
			delete(q.held, k)
		}
	}
	if len(q.waiting) == 0 || q.throttle.active(now) {
		return nil
	}
	byPool := map[string][]waiter{}
	for _, w := range q.waiting {
		byPool[w.req.Pool] = append(byPool[w.req.Pool], w)
	}
	for _, ws := range byPool {
		slices.SortFunc(ws, olderFirst)
	}
	u := q.usage()
	var grants []Grant
	for {
		// Each grant moves the turn on: the next pool after the one just served is asked first.
		granted := false
		for _, p := range inTurn(&q.turns, byPool) {
			ws := byPool[p]
			i := slices.IndexFunc(ws, func(w waiter) bool { return q.fits(u, w.req) })
			if i < 0 {
				continue
			}
			w := ws[i]
			if byPool[p] = slices.Delete(ws, i, i+1); len(byPool[p]) == 0 {
				delete(byPool, p)
			}
			delete(q.waiting, w.req.Key)
			q.held[w.req.Key] = held{req: w.req, grantedAt: now}
			u.add(w.req)
			q.turns.served(p)
			grants = append(grants, Grant{Key: w.req.Key, Op: w.req.Op, Waited: now.Sub(w.since)})
			granted = true
			break
		}
		if !granted {
			break
		}
	}
	return grants
}

func olderFirst(a, b waiter) int {
	if c := a.req.Created.Compare(b.req.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.req.Key, b.req.Key)
}

// turns is the round robin across pools: a pool served longer ago than another is asked first, so
// a pool that waits is passed over by each other pool at most once before its turn.
type turns struct {
	seq  uint64
	last map[string]uint64
}

func (t *turns) served(pool string) {
	if t.last == nil {
		t.last = map[string]uint64{}
	}
	t.seq++
	t.last[pool] = t.seq
}

// inTurn lists the pools of byPool in the order they are asked: served longest ago first, then
// by name.
func inTurn[T any](t *turns, byPool map[string]T) []string {
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	slices.SortFunc(pools, func(a, b string) int {
		if c := cmp.Compare(t.last[a], t.last[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return pools
}
