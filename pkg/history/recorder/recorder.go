package recorder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// DefaultMaxPending bounds the pieces kept while the store is unavailable: about an hour of a busy
// installation's records (a job is six to eight pieces), a few hundred bytes each.
const DefaultMaxPending = 100_000

// Backoff bounds between attempts at a piece the store refused for a reason that may pass.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Options configure a Recorder.
type Options struct {
	// Open opens the store; it is called again, with backoff, until it succeeds.
	Open func(ctx context.Context) (history.Store, error)
	// Signer seals finished job records. Key, when Signer is nil, gets it the first time a record
	// is to be sealed, and again after a failure. Without either, records are kept unsealed (and
	// say so in the log once).
	Signer *provenance.Signer
	Key    func(ctx context.Context) (provenance.Signer, error)
	// Retention is how long records are kept: once a day, and first a minute after Start, the
	// store prunes what is older (history.Store.Prune). Zero keeps everything.
	Retention time.Duration
	// UnfinishedAfter is how long after its VM's destruction a job may still report its
	// completion: a record no completion reached by then (a lost webhook, a platform that never
	// said) is closed as OutcomeUnknown, with the reason, and sealed, so that every job's record
	// ends. The store is swept for them every UnfinishedAfter/4 (at most every 10 minutes), first
	// a minute after Start. Zero leaves such records open.
	UnfinishedAfter time.Duration
	// MaxPending bounds the queue; zero means DefaultMaxPending.
	MaxPending int
	// Log receives the records as structured lines (one per sealed job record and per audit
	// entry) and the recorder's own errors.
	Log logr.Logger
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Health says whether records reach the store.
type Health struct {
	// Pending pieces wait for the store.
	Pending int
	// Failing is set while the store refuses writes for a reason that may pass (or cannot be
	// opened); FailingSince says since when and LastError why.
	Failing      bool
	FailingSince time.Time
	LastError    string
	// Dropped pieces did not fit in the queue (since start).
	Dropped uint64
	// Written pieces and Sealed records since start.
	Written, Sealed uint64
}

type pieceKind int

const (
	pieceJob pieceKind = iota
	pieceRunner
	pieceAudit
)

type piece struct {
	kind              pieceKind
	job               history.JobRecord
	namespace, runner string
	audit             history.AuditEntry
}

// Recorder queues pieces of job records and audit entries and writes them in order. Its methods
// never block on the store and are safe for concurrent use.
type Recorder struct {
	opts Options

	mu      sync.Mutex
	queue   []piece
	wake    chan struct{}
	health  Health
	noKeyAt time.Time
	// unsealed holds complete records that wait for the provenance key (writer goroutine only).
	unsealed map[string]bool
}

// New returns a Recorder; Start runs its writer.
func New(opts Options) *Recorder {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{opts: opts, wake: make(chan struct{}, 1)}
}

// Job queues a piece of a job's record (see history.Store.UpsertJob).
func (r *Recorder) Job(rec history.JobRecord) { r.enqueue(piece{kind: pieceJob, job: rec}) }

// Runner queues what was learned about a runner's VM (see history.Store.UpsertRunner).
func (r *Recorder) Runner(namespace, runner string, facts history.JobRecord) {
	r.enqueue(piece{kind: pieceRunner, namespace: namespace, runner: runner, job: facts})
}

// Audit queues an audit entry; an entry without a time is stamped now, not when it is written.
func (r *Recorder) Audit(e history.AuditEntry) {
	if e.Time.IsZero() {
		e.Time = r.opts.Now()
	}
	r.enqueue(piece{kind: pieceAudit, audit: e})
}

func (r *Recorder) enqueue(p piece) {
	r.mu.Lock()
	if len(r.queue) >= r.opts.MaxPending {
		r.health.Dropped++
		r.mu.Unlock()
		metrics.HistoryDropped.Inc()
		r.opts.Log.Error(errors.New("history queue full"), "record dropped: the history store has been unavailable too long", "pending", r.opts.MaxPending)
		return
	}
	r.queue = append(r.queue, p)
	metrics.HistoryPending.Set(float64(len(r.queue)))
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Health reports the recorder's state now.
func (r *Recorder) Health() Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health
	h.Pending = len(r.queue)
	return h
}

// NeedLeaderElection is false: every replica receives webhooks and writes what it learns.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start writes queued pieces until ctx ends (a controller-runtime Runnable). Pieces still queued
// then are lost with the process: a record missing them stays unsealed.
func (r *Recorder) Start(ctx context.Context) error {
	var store history.Store
	defer func() {
		if store != nil {
			store.Close()
		}
	}()
	backoff := minBackoff
	nextPrune := r.opts.Now().Add(time.Minute)
	// The sweep keeps the wall clock's time (opts.Now only says what is old enough).
	nextSweep := time.Now().Add(min(time.Minute, r.sweepInterval()))
	for {
		var err error
		if store == nil {
			if store, err = r.opts.Open(ctx); err != nil {
				store = nil
				err = fmt.Errorf("opening the history store: %w", err)
			}
		}
		if store != nil && r.opts.Retention > 0 && !r.opts.Now().Before(nextPrune) {
			nextPrune = r.opts.Now().Add(24 * time.Hour)
			r.prune(ctx, store)
		}
		p, ok := r.head()
		if !ok && err == nil && r.opts.UnfinishedAfter > 0 && !time.Now().Before(nextSweep) {
			// Only with nothing queued: a completion waiting in the queue is written first.
			nextSweep = time.Now().Add(r.sweepInterval())
			r.closeUnfinished(ctx, store)
			continue
		}
		if !ok && err == nil {
			var pruneDue, sealDue, sweepDue <-chan time.Time // never, without a retention, records to seal or a sweep
			if r.opts.Retention > 0 {
				pruneDue = time.After(time.Until(nextPrune))
			}
			if r.opts.UnfinishedAfter > 0 {
				sweepDue = time.After(time.Until(nextSweep))
			}
			if len(r.unsealed) > 0 {
				sealDue = time.After(backoff)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-r.wake:
			case <-pruneDue:
			case <-sweepDue:
			case <-sealDue:
				backoff = min(2*backoff, maxBackoff)
				for id := range r.unsealed {
					if err := r.seal(ctx, store, id); err != nil {
						r.opts.Log.Error(err, "sealing a job record that waited for the key", "job", id)
						break
					}
				}
			}
			continue
		}
		if ok && err == nil {
			err = r.apply(ctx, store, p)
		}
		switch {
		case err == nil:
			r.done(true)
			backoff = minBackoff
			continue
		case permanent(err):
			r.opts.Log.Error(err, "history record refused; dropped", "kind", p.kind)
			r.done(false)
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		r.failing(err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// prune deletes what is older than the retention. A failure is only logged: the next day tries
// again, and nothing is lost by keeping records longer.
func (r *Recorder) prune(ctx context.Context, store history.Store) {
	jobs, audit, err := store.Prune(ctx, r.opts.Now().Add(-r.opts.Retention))
	if err != nil {
		r.opts.Log.Error(err, "pruning the history store")
		return
	}
	r.opts.Log.Info("pruned the history store", "retention", r.opts.Retention, "jobRecords", jobs, "auditEntries", audit)
}

// sweepInterval is how often the store is searched for records no completion reached.
func (r *Recorder) sweepInterval() time.Duration {
	return min(r.opts.UnfinishedAfter/4, 10*time.Minute)
}

// closeUnfinished ends the records of jobs whose VM has been gone UnfinishedAfter without their
// completion: the outcome is unknown, the reason says so, and the record is sealed. A completion
// that arrives later finds the record sealed and is not recorded. A failure is only logged: the
// next sweep tries again.
func (r *Recorder) closeUnfinished(ctx context.Context, store history.Store) {
	ids, err := store.Unfinished(ctx, r.opts.Now().Add(-r.opts.UnfinishedAfter), 0)
	if err != nil {
		r.opts.Log.Error(err, "searching the history store for jobs whose completion never came")
		return
	}
	reason := fmt.Sprintf("no completion of the job reached HyperFleet within %s of its VM's destruction", r.opts.UnfinishedAfter)
	for _, id := range ids {
		err := store.UpsertJob(ctx, history.JobRecord{ID: id, Outcome: history.OutcomeUnknown, FailureReason: reason})
		if errors.Is(err, history.ErrSealed) {
			continue // another replica closed it first
		}
		if err == nil {
			err = r.seal(ctx, store, id)
		}
		if err != nil {
			r.opts.Log.Error(err, "closing a job record whose completion never came", "job", id)
			return
		}
		r.opts.Log.Info("closed a job record whose completion never came", "job", id, "outcome", history.OutcomeUnknown)
	}
}

// permanent errors do not pass by retrying: the piece is dropped so that the rest may be written.
func permanent(err error) bool {
	return errors.Is(err, history.ErrInvalid) || errors.Is(err, history.ErrSchemaTooNew)
}

func (r *Recorder) head() (piece, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return piece{}, false
	}
	return r.queue[0], true
}

// done takes the head off the queue once it is written (or refused for good).
func (r *Recorder) done(written bool) {
	r.mu.Lock()
	r.queue[0] = piece{}
	r.queue = r.queue[1:]
	if len(r.queue) == 0 {
		r.queue = nil // let the backing array of an outage's backlog go
	}
	wasFailing := r.health.Failing
	if written {
		r.health.Written++
		r.health.Failing, r.health.FailingSince, r.health.LastError = false, time.Time{}, ""
	}
	pending := len(r.queue)
	r.mu.Unlock()
	metrics.HistoryPending.Set(float64(pending))
	if written {
		metrics.HistoryWrites.WithLabelValues("ok").Inc()
		metrics.HistoryStoreUp.Set(1)
	}
	if written && wasFailing {
		r.opts.Log.Info("history store writable again", "pending", pending)
	}
}

func (r *Recorder) failing(err error) {
	r.mu.Lock()
	first := !r.health.Failing
	if first {
		r.health.Failing, r.health.FailingSince = true, r.opts.Now()
	}
	r.health.LastError = err.Error()
	pending := len(r.queue)
	r.mu.Unlock()
	metrics.HistoryWrites.WithLabelValues("error").Inc()
	metrics.HistoryStoreUp.Set(0)
	if first {
		r.opts.Log.Error(err, "history store unavailable; records are kept in order and retried", "pending", pending)
	}
}

// apply writes one piece and seals the record it completed. Both are idempotent, so a piece whose
// write succeeded but whose seal failed is simply applied again.
func (r *Recorder) apply(ctx context.Context, store history.Store, p piece) error {
	switch p.kind {
	case pieceAudit:
		id, err := store.AppendAudit(ctx, p.audit)
		if err == nil {
			p.audit.ID = id
			logAudit(r.opts.Log, p.audit)
		}
		return err
	case pieceRunner:
		id, err := store.UpsertRunner(ctx, p.namespace, p.runner, p.job)
		if err != nil || id == "" {
			return err
		}
		return r.seal(ctx, store, id)
	}
	err := store.UpsertJob(ctx, p.job)
	if errors.Is(err, history.ErrSealed) {
		// A late or repeated delivery about a job whose record is already signed: the record
		// stands as signed.
		r.opts.Log.V(1).Info("job record already sealed; late piece not recorded", "job", p.job.ID)
		return nil
	}
	if err != nil {
		return err
	}
	id := p.job.ID
	if id == "" {
		id = p.job.Platform + "/" + p.job.JobID
	}
	return r.seal(ctx, store, id)
}
