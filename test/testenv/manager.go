package testenv

import (
	"context"
	"sync"
	"testing"
)

// Starter is what RunManager runs: a controller-runtime manager.
type Starter interface {
	Start(ctx context.Context) error
}

// RunManager starts mgr in the background. It is stopped, and waited for, when the returned stop
// is first called or when t ends; an error it stops with fails t.
func RunManager(t testing.TB, mgr Starter) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
