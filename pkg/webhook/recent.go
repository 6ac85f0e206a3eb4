package webhook

import (
	"container/list"
	"sync"
)

// recentDeliveries remembers the last delivery ids, to answer GitHub's redeliveries without
// queueing them again. It is a cache: a forgotten id only costs a no-op ledger write.
type recentDeliveries struct {
	mu    sync.Mutex
	max   int
	order *list.List // front is newest
	index map[string]*list.Element
}

func newRecentDeliveries(max int) *recentDeliveries {
	return &recentDeliveries{max: max, order: list.New(), index: make(map[string]*list.Element, max)}
}

// add remembers id and reports whether it was new.
func (r *recentDeliveries) add(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.index[id]; ok {
		r.order.MoveToFront(e)
		return false
	}
	r.index[id] = r.order.PushFront(id)
	if r.order.Len() > r.max {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.index, oldest.Value.(string))
	}
	return true
}

// forget drops id, so a redelivery of an event that could not be handled is handled again.
func (r *recentDeliveries) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.index[id]; ok {
		r.order.Remove(e)
		delete(r.index, id)
	}
}
