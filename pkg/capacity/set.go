package capacity

import "sync"

// Set holds one Queue per hypervisor cluster, keyed by the caller (namespace/name).
type Set struct {
	mu     sync.Mutex
	queues map[string]*Queue
}

// For returns key's queue with limits applied. On first use it creates the queue and runs init
// on it before anyone else can use it, so the caller records the slots already in use (tasks a
// previous process started) before any new one is handed out. grants are requests a change of
// limits admitted, to be woken.
func (s *Set) For(key string, limits Limits, init func(*Queue) error) (q *Queue, grants []Grant, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues == nil {
		s.queues = map[string]*Queue{}
	}
	if q, ok := s.queues[key]; ok {
		if q.Limits() != limits {
			grants = q.SetLimits(limits)
		}
		return q, grants, nil
	}
	q = NewQueue(limits)
	if init != nil {
		if err := init(q); err != nil {
			return nil, nil, err
		}
	}
	s.queues[key] = q
	return q, nil, nil
}

// Each calls f with every queue.
func (s *Set) Each(f func(key string, q *Queue)) {
	s.mu.Lock()
	queues := make(map[string]*Queue, len(s.queues))
	for k, q := range s.queues {
		queues[k] = q
	}
	s.mu.Unlock()
	for k, q := range queues {
		f(k, q)
	}
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
