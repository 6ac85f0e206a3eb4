package sharedcall

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestCallGroupSharesACallUnderWay(t *testing.T) {
	g := NewWithT(t)
	var group Group[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func() (int, error) {
		calls.Add(1)
		<-release
		return 42, nil
	}
	var wg sync.WaitGroup
	results := make(chan int, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := group.Do(context.Background(), "templates", fn)
			if err == nil {
				results <- v
			}
		}()
	}
	g.Eventually(calls.Load).Should(Equal(int32(1)))
	time.Sleep(50 * time.Millisecond) // the other nine are waiting, not calling
	close(release)
	wg.Wait()
	close(results)
	g.Expect(calls.Load()).To(Equal(int32(1)), "ten concurrent callers, one call")
	n := 0
	for v := range results {
		g.Expect(v).To(Equal(42))
		n++
	}
	g.Expect(n).To(Equal(10))

	// Once done, the next caller calls again: the group shares calls, it caches nothing.
	v, err := group.Do(context.Background(), "templates", func() (int, error) { calls.Add(1); return 7, nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(7))
	g.Expect(calls.Load()).To(Equal(int32(2)))
}

func TestCallGroupKeysAndCancellation(t *testing.T) {
	g := NewWithT(t)
	var group Group[string, int]
	release := make(chan struct{})
	started := make(chan struct{})
	leader := make(chan error, 1)
	go func() {
		_, err := group.Do(context.Background(), "a", func() (int, error) {
			close(started)
			<-release
			return 0, errors.New("host unreachable")
		})
		leader <- err
	}()
	<-started
	// Another key is not held up.
	v, err := group.Do(context.Background(), "b", func() (int, error) { return 1, nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(1))
	// A waiter whose context ends stops waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = group.Do(ctx, "a", func() (int, error) { t.Error("a second call of a"); return 0, nil })
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	// The leader's error reaches the leader.
	close(release)
	g.Eventually(leader).Should(Receive(MatchError("host unreachable")))
}
