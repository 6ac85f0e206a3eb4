package fakeserver

import (
	"context"
	"sync"
)

// Queue delivers items in order from one goroutine, so a job's events leave in the order they
// happened and the fake's API never blocks on a slow receiver. Stop drops what is not sent yet.
type Queue[T any] struct {
	send    func(context.Context, T)
	mu      sync.Mutex
	items   []T
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

// NewQueue returns a stopped queue that hands each item to send; send's context ends on Stop.
func NewQueue[T any](send func(context.Context, T)) *Queue[T] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Queue[T]{send: send, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Start starts delivering; calling it again does nothing.
func (q *Queue[T]) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.started {
		q.started = true
		go q.run()
	}
}

// Stop ends delivery and waits for the item being sent, if any.
func (q *Queue[T]) Stop() {
	q.cancel()
	q.mu.Lock()
	started := q.started
	q.mu.Unlock()
	if started {
		<-q.done
	}
}

// Push queues an item behind the ones already queued.
func (q *Queue[T]) Push(item T) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		q.mu.Unlock()
		for _, item := range items {
			if q.ctx.Err() != nil {
				return
			}
			q.send(q.ctx, item)
		}
		select {
		case <-q.ctx.Done():
			return
		case <-q.wake:
		}
	}
}
