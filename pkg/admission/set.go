package admission

import "sync"

// Set holds one Queue per hypervisor cluster, keyed by the caller (namespace/name).
type Set struct {
	mu     sync.Mutex
	queues map[string]*Queue
}

// For returns key's queue with limits applied, creating it on first use; created is true then,
// so the caller can record the slots already in use. grants are requests a change of limits
// admitted, to be woken.
func (s *Set) For(key string, limits Limits) (q *Queue, created bool, grants []Grant) {
	s.mu.Lock()
	if s.queues == nil {
		s.queues = map[string]*Queue{}
	}
	q, ok := s.queues[key]
	if !ok {
		q = NewQueue(limits)
		s.queues[key] = q
	}
	s.mu.Unlock()
	if ok && q.Limits() != limits {
		grants = q.SetLimits(limits)
	}
	return q, !ok, grants
}

// Get returns key's queue, nil when it has none yet.
func (s *Set) Get(key string) *Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[key]
}

// Forget drops key's queue (its cluster is gone).
func (s *Set) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queues, key)
}
