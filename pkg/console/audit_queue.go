package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// auditQueueSize bounds the entries waiting to be written; more are dropped and counted, so a slow
// or absent database never holds up a person's request nor grows the console's memory.
const auditQueueSize = 10000

// auditQueue writes audit entries to the history store from one goroutine, in the order they were
// queued, retrying a failed write with backoff. It opens the store itself and keeps trying when it
// cannot, so an unreachable database at start costs entries only once the queue is full.
type auditQueue struct {
	url     string
	open    func(ctx context.Context, url string) (history.Store, error)
	log     logr.Logger
	entries chan history.AuditEntry
	// minBackoff and maxBackoff pace the retries of a failed open or write.
	minBackoff, maxBackoff time.Duration

	mu sync.Mutex
	// store is nil until opened; unavailable says why the log cannot be read or written now.
	store       history.Store
	unavailable error

	dropped atomic.Int64
	written atomic.Int64
}

func newAuditQueue(url string, open func(ctx context.Context, url string) (history.Store, error), log logr.Logger) *auditQueue {
	q := &auditQueue{url: url, open: open, log: log, entries: make(chan history.AuditEntry, auditQueueSize),
		minBackoff: 250 * time.Millisecond, maxBackoff: time.Minute}
	if url == "" {
		q.unavailable = errors.New("no history database is configured (HISTORY_URL)")
	} else {
		q.unavailable = errors.New("the history database is not open yet")
	}
	return q
}

// record queues e without waiting; a full queue drops it, counts and logs the drop.
func (q *auditQueue) record(e history.AuditEntry) {
	select {
	case q.entries <- e:
	default:
		n := q.dropped.Add(1)
		q.log.Error(errors.New("audit queue full"), "audit entry dropped", "dropped", n, "actor", e.Actor.Subject,
			"action", e.Action, "kind", e.Object.Kind, "namespace", e.Object.Namespace, "name", e.Object.Name, "result", e.Result)
	}
}

// Store is the open history store, or the reason there is none.
func (q *auditQueue) Store() (history.Store, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.store == nil {
		return nil, q.unavailable
	}
	return q.store, nil
}

// Dropped counts the entries lost to a full queue since the console started.
func (q *auditQueue) Dropped() int64 { return q.dropped.Load() }

// openStore makes one attempt to open the store.
func (q *auditQueue) openStore(ctx context.Context) error {
	if q.url == "" {
		return q.unavailable
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := q.open(ctx, q.url)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.unavailable = fmt.Errorf("the history database cannot be opened: %w", err)
		return q.unavailable
	}
	q.store, q.unavailable = st, nil
	return nil
}

// run opens the store if it is not open and writes queued entries until ctx ends, then writes what
// is still queued for a few seconds more and closes the store.
func (q *auditQueue) run(ctx context.Context) {
	defer func() {
		if st, err := q.Store(); err == nil {
			_ = st.Close()
		}
	}()
	backoff := q.minBackoff
	for {
		if _, err := q.Store(); err == nil {
			break
		}
		if err := q.openStore(ctx); err != nil {
			if q.url == "" {
				<-ctx.Done()
				return
			}
			q.log.Error(err, "audit log unavailable; retrying", "in", backoff, "queued", len(q.entries), "dropped", q.Dropped())
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, q.maxBackoff)
			continue
		}
		q.log.Info("audit log open", "queued", len(q.entries))
	}
	for {
		select {
		case e := <-q.entries:
			q.write(ctx, e)
		case <-ctx.Done():
			q.drain()
			return
		}
	}
}

// write appends e, retrying with backoff until it is written, the store refuses it as invalid
// (it never would take it), or ctx ends.
func (q *auditQueue) write(ctx context.Context, e history.AuditEntry) bool {
	st, _ := q.Store()
	backoff := q.minBackoff
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, err := st.AppendAudit(wctx, e)
		cancel()
		switch {
		case err == nil:
			q.written.Add(1)
			return true
		case errors.Is(err, history.ErrInvalid):
			q.log.Error(err, "audit entry refused by the store", "actor", e.Actor.Subject, "action", e.Action)
			return false
		}
		q.log.Error(err, "writing audit entry; retrying", "in", backoff, "queued", len(q.entries))
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, q.maxBackoff)
	}
}

// drain writes what is queued at shutdown, for at most five seconds; what is left is logged as lost.
func (q *auditQueue) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case e := <-q.entries:
			if !q.write(ctx, e) && ctx.Err() != nil {
				q.log.Error(ctx.Err(), "audit entries lost at shutdown", "count", len(q.entries)+1)
				return
			}
		default:
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
