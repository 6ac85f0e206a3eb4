package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// flakyStore is a history store whose database refuses the first failures writes, then recovers.
type flakyStore struct {
	history.Store
	mu       sync.Mutex
	failures int
	attempts int
	written  []string
}

func (s *flakyStore) AppendAudit(_ context.Context, e history.AuditEntry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.failures > 0 {
		s.failures--
		return 0, errors.New("database is locked")
	}
	s.written = append(s.written, e.Detail)
	return int64(len(s.written)), nil
}

func (s *flakyStore) Close() error { return nil }

func (s *flakyStore) state() (attempts int, written []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, append([]string(nil), s.written...)
}

func entryNo(i int) history.AuditEntry {
	return history.AuditEntry{Actor: history.Actor{Subject: "oidc:alice@example.com", Kind: history.ActorPerson}, Action: "scale",
		Detail: fmt.Sprintf("replicas %d", i)}
}

func startQueue(t *testing.T, q *auditQueue) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestAuditQueueRetriesInOrder: writes that fail are retried until the store recovers, and the
// entries reach it in the order they were recorded, none twice.
func TestAuditQueueRetriesInOrder(t *testing.T) {
	g := NewWithT(t)
	store := &flakyStore{failures: 4}
	q := newAuditQueue("sqlite:///audit.db", func(context.Context, string) (history.Store, error) { return store, nil }, logr.Discard())
	q.minBackoff, q.maxBackoff = time.Millisecond, 5*time.Millisecond
	var want []string
	for i := range 20 {
		q.record(entryNo(i))
		want = append(want, entryNo(i).Detail)
	}
	startQueue(t, q)
	g.Eventually(func() []string { _, w := store.state(); return w }, 5*time.Second, 5*time.Millisecond).Should(Equal(want))
	attempts, _ := store.state()
	g.Expect(attempts).To(Equal(24), "each failure retried once more")
	g.Expect(q.Dropped()).To(BeZero())
}

// TestAuditQueueOpensLate: a store that cannot be opened at first is opened by the queue later;
// until then the audit log says why it is unavailable and the entries wait.
func TestAuditQueueOpensLate(t *testing.T) {
	g := NewWithT(t)
	store := &flakyStore{}
	var mu sync.Mutex
	refusals := 3
	open := func(context.Context, string) (history.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			return nil, errors.New("connection refused")
		}
		return store, nil
	}
	q := newAuditQueue("postgres://db/history", open, logr.Discard())
	q.minBackoff, q.maxBackoff = time.Millisecond, 5*time.Millisecond
	g.Expect(q.openStore(context.Background())).To(MatchError(ContainSubstring("connection refused")))
	_, err := q.Store()
	g.Expect(err).To(MatchError(ContainSubstring("cannot be opened: connection refused")))
	q.record(entryNo(1))
	startQueue(t, q)
	g.Eventually(func() []string { _, w := store.state(); return w }, 5*time.Second, 5*time.Millisecond).Should(Equal([]string{"replicas 1"}))
	_, err = q.Store()
	g.Expect(err).NotTo(HaveOccurred())
}

// TestAuditQueueDropsWhenFull: a full queue never blocks the request that records; it counts the
// entries it drops.
func TestAuditQueueDropsWhenFull(t *testing.T) {
	g := NewWithT(t)
	q := newAuditQueue("", nil, logr.Discard())
	done := make(chan struct{})
	go func() {
		for i := range auditQueueSize + 5 {
			q.record(entryNo(i))
		}
		close(done)
	}()
	g.Eventually(done, 5*time.Second).Should(BeClosed())
	g.Expect(q.Dropped()).To(BeEquivalentTo(5))
	_, err := q.Store()
	g.Expect(err).To(MatchError(ContainSubstring("HISTORY_URL")))
}
