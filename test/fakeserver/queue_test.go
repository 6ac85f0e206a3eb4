package fakeserver

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestQueueDeliversInOrder: items pushed before and after Start leave in push order, one at a
// time; Stop drops the rest and returns once the item in flight is done.
func TestQueueDeliversInOrder(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var got []int
	inFlight := 0
	q := NewQueue(func(_ context.Context, n int) {
		mu.Lock()
		inFlight++
		g.Expect(inFlight).To(Equal(1), "one delivery at a time")
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight--
		got = append(got, n)
		mu.Unlock()
	})
	q.Push(0)
	q.Start()
	q.Start()
	for i := 1; i < 50; i++ {
		q.Push(i)
	}
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(got) }, 5*time.Second).Should(Equal(50))
	want := make([]int, 50)
	for i := range want {
		want[i] = i
	}
	g.Expect(got).To(Equal(want))

	blocked := make(chan struct{})
	stopped := NewQueue(func(ctx context.Context, _ int) { close(blocked); <-ctx.Done() })
	stopped.Start()
	stopped.Push(1)
	stopped.Push(2)
	<-blocked
	stopped.Stop()
}
