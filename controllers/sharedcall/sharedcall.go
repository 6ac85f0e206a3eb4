// Package sharedcall runs one call per key at a time for every caller that asks meanwhile: the
// per-cluster listings and caches the controllers share.
package sharedcall

import (
	"context"
	"sync"
)

// Group runs one call per key at a time and hands its result to every caller that asked
// meanwhile: the shared template resolutions and node listings expire for all claims at once, and
// ten concurrent reconciles each made their own listing of every VM of the cluster (a burst of
// 400 runners made 848 such listings where 70 served). A caller whose context ends stops waiting;
// the call goes on for the others.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*sharedCall[V]
}

type sharedCall[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// Do returns fn's result for key, calling fn unless a call for key is under way.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func() (V, error)) (V, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[K]*sharedCall[V]{}
	}
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	c := &sharedCall[V]{done: make(chan struct{})}
	g.calls[key] = c
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn()
	return c.val, c.err
}
