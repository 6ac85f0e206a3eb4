package instrumented

import (
	"container/list"
	"sync"
	"time"
)

// maxTrackedTasks bounds the memory spent on task start times. It is far above the tasks a manager
// has in flight (parallel reconciles times hypervisor clusters); a task dropped by eviction is simply
// not timed.
const maxTrackedTasks = 4096

// tasks is shared by every wrapped provider, so a task survives the provider being rebuilt by
// hypervisor.Cache (e.g. after a credentials rotation). Tasks started by another process or replica
// are unknown and not timed: the provider interface carries no start time.
var tasks = newTaskTracker(maxTrackedTasks)

// taskTracker remembers when tasks started, evicting the oldest beyond max.
type taskTracker struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *trackedTask, oldest first
	byKey map[string]*list.Element
}

type trackedTask struct {
	key, op string
	started time.Time
}

func newTaskTracker(max int) *taskTracker {
	return &taskTracker{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (t *taskTracker) add(key, op string, started time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok {
		t.order.Remove(e)
	}
	for t.order.Len() >= t.max {
		oldest := t.order.Front()
		t.order.Remove(oldest)
		delete(t.byKey, oldest.Value.(*trackedTask).key)
	}
	t.byKey[key] = t.order.PushBack(&trackedTask{key: key, op: op, started: started})
}

// finish returns and forgets a task's start, so a task polled again after it ended is timed once.
func (t *taskTracker) finish(key string) (op string, started time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byKey[key]
	if !ok {
		return "", time.Time{}, false
	}
	t.order.Remove(e)
	delete(t.byKey, key)
	tt := e.Value.(*trackedTask)
	return tt.op, tt.started, true
}

func (t *taskTracker) forget(key string) { t.finish(key) }

func (t *taskTracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}
