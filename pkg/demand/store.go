package demand

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

const (
	// DefaultRetention is how long completed jobs stay in the ledger, so a late or replayed
	// delivery for a finished job is recognised and cannot queue it again.
	DefaultRetention = time.Hour
	// DefaultMaxRecords bounds one pool's ledger. A record is about 60-120 bytes, so 5000 stay
	// far below the API server's 1 MiB object limit; a byte bound (900 KiB) covers unusually
	// long label sets and runner names.
	DefaultMaxRecords = 5000
	// ConfigMapSuffix names a pool's ledger: "<pool>-jobs".
	ConfigMapSuffix = "-jobs"

	// writeAttempts bounds the optimistic-concurrency retries of one write. Every attempt that
	// fails means another writer succeeded, so 40 outlasts dozens of concurrent writers.
	writeAttempts = 40
	retryBase     = 5 * time.Millisecond
	retryCap      = 400 * time.Millisecond
)

// ErrLedgerFull is returned when a new job cannot be recorded because the pool's ledger holds
// MaxRecords jobs that are all still queued or running. The repair loop adds the job later,
// once room is free.
var ErrLedgerFull = errors.New("job ledger full")

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

// Store reads and writes RunnerPool job ledgers. It holds no state of its own: any number of
// Stores, in any number of processes, may write the same ledger.
type Store struct {
	// Client should read from the API server, not an informer cache: a stale read only costs
	// a conflict and a retry, but a cache of every ConfigMap costs memory for nothing.
	Client client.Client
	// Retention is how long completed records are kept; zero means DefaultRetention.
	Retention time.Duration
	// MaxRecords bounds each ledger; zero means DefaultMaxRecords.
	MaxRecords int
	// Now is the clock; tests replace it.
	Now func() time.Time
	// Pickups, when set, is told of each job the ledger sees go from queued to in progress on a
	// runner, once: only the write that moved the record forward reports it.
	Pickups PickupObserver
	// Jobs, when set, is told of each job event a write moved forward, once, after the write:
	// the job history recorder keeps what the ledger forgets.
	Jobs JobObserver
}

// JobObserver is told of the job events the ledger applied, with when the ledger saw them. It must
// not block.
type JobObserver interface {
	ObserveJob(ctx context.Context, pool *fleetv1.RunnerPool, ev platform.JobEvent, at time.Time)
}

// NewStore returns a Store with the default retention and size bound, which reports pickup
// latencies by path to hyperfleet_job_pickup_seconds.
func NewStore(c client.Client) *Store {
	return &Store{Client: c, Retention: DefaultRetention, MaxRecords: DefaultMaxRecords, Now: time.Now,
		Pickups: PickupMetrics{Reader: c}}
}

// ConfigMapName is the name of pool's ledger.
func ConfigMapName(pool string) string { return pool + ConfigMapSuffix }

// ConfigMapKey locates pool's ledger.
func ConfigMapKey(pool *fleetv1.RunnerPool) types.NamespacedName {
	return types.NamespacedName{Namespace: pool.Namespace, Name: ConfigMapName(pool.Name)}
}

type observedAtKey struct{}

// WithObservedAt tells Record when the event was received, so transition times (and the
// first-queued time the webhook-to-runner latency is measured from) do not include the time
// the event spent in a queue.
func WithObservedAt(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, observedAtKey{}, t)
}

type listedAtKey struct{}

// WithListedAt tells Repair when the platform's listing it is given began, so a delivery the
// listing may predate is not overruled by it (see applyListing).
func WithListedAt(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, listedAtKey{}, t)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return DefaultRetention
}

func (s *Store) maxRecords() int {
	if s.MaxRecords > 0 {
		return s.MaxRecords
	}
	return DefaultMaxRecords
}

// Record applies one job event to pool's ledger. Only forward transitions are applied
// (platform.IsForward: waiting < queued < in_progress < completed), so duplicates, replays and
// events arriving out of order return changed=false. A disputed job (Record.Disputed: a listing
// contradicted an earlier delivery that said it ran or ended) is not taken out of the queue by a
// delivery at all, since whoever forged the first can forge the next. A held (waiting) job is
// recorded but is not demand until its queued event arrives. A job the ledger has never seen is recorded whatever its
// state: a runner of ours may have taken a job whose queued event was lost, and a completed
// record keeps a late queued replay from creating demand.
func (s *Store) Record(ctx context.Context, pool *fleetv1.RunnerPool, ev platform.JobEvent) (bool, error) {
	if ev.JobID == "" || !ev.State.Valid() {
		return false, fmt.Errorf("job event needs a job id and a known state (job %q, state %q)", ev.JobID, ev.State)
	}
	key := JobKey(ev.JobID)
	at, ok := ctx.Value(observedAtKey{}).(time.Time)
	if !ok {
		at = s.now()
	}
	var pickup *Pickup
	changed, err := s.mutate(ctx, pool, func(jobs map[string]Record) bool {
		pickup = nil // a retry starts over from a fresh read
		old, known := jobs[key]
		if known && !platform.IsForward(old.forwardFrom(), ev.State) {
			return false
		}
		if known && old.Disputed && old.leavesQueue(ev.State) {
			return false // the platform contradicted a delivery about this job: only its listings move it on
		}
		switch {
		case ev.State != platform.JobInProgress || ev.RunnerName == "":
		case known && old.forwardFrom().NeedsRunner() && !old.FirstQueued.IsZero():
			pickup = &Pickup{JobKey: key, Runner: ev.RunnerName, Queued: old.FirstQueued, Started: at}
		case !known && !ev.CreatedAt.IsZero() && ev.CreatedAt.Before(at):
			// Its queued delivery has not been processed yet (a pickup within moments, deliveries
			// handled out of order): the platform's creation time is the queue time.
			pickup = &Pickup{JobKey: key, Runner: ev.RunnerName, Queued: ev.CreatedAt, Started: at}
		}
		r := old
		r.State, r.Transition, r.Unlisted, r.Presumed = ev.State, at, 0, false
		if !known || r.LabelSet == "" {
			r.LabelSet = platform.LabelSetKey(ev.Labels)
		}
		if ev.State.NeedsRunner() && r.FirstQueued.IsZero() {
			r.FirstQueued = at
		}
		if ev.RunnerName != "" {
			r.Runner = ev.RunnerName
		}
		jobs[key] = r
		return true
	})
	if changed && err == nil && pickup != nil && s.Pickups != nil {
		s.Pickups.ObservePickup(ctx, pool, *pickup)
	}
	if changed && err == nil && s.Jobs != nil {
		s.Jobs.ObserveJob(ctx, pool, ev, at)
	}
	return changed, err
}

// Snapshot reads pool's ledger; a pool without one has no demand.
func (s *Store) Snapshot(ctx context.Context, pool *fleetv1.RunnerPool) (Demand, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Client.Get(ctx, ConfigMapKey(pool), cm); err != nil {
		if apierrors.IsNotFound(err) {
			return newDemand(map[string]Record{}), nil
		}
		return Demand{}, fmt.Errorf("reading job ledger: %w", err)
	}
	return newDemand(decodeLedger(cm.Data)), nil
}

// Repair reconciles pool's ledger with the platform's list of jobs waiting for a runner or held
// (platform.DemandSource.QueuedJobs), which the repair loop fetches because webhooks may be lost,
// forged or stale. queued must hold only the jobs routed to this pool (see JobsForPool); the
// listing began at the time WithListedAt gave ctx, else now. Jobs the ledger lacks are added in
// their listed state (queued when the list gives none). The platform's word wins over the order
// webhooks imposed and over what they claimed (see applyListing): a job the ledger holds as
// queued that the platform lists as held goes back to waiting, and a job a delivery called
// running or done that the platform lists as queued or held goes back to that state.
//
// Jobs the ledger holds as queued or waiting that the platform no longer lists were cancelled or
// taken by a runner that is not ours; but a list is no proof of absence (a paged listing misses
// entries that shift between pages while runs start, and it may predate the webhook that
// announced a job). So such a job is presumed completed only when unlistedRepairs listings in a
// row missed it and it was queued at least minAge ago, and the presumption is undone (the job is
// queued again, counted as added) when a later listing shows it queued or held.
func (s *Store) Repair(ctx context.Context, pool *fleetv1.RunnerPool, queued []platform.Job, minAge time.Duration) (added, removed int, err error) {
	began, ok := ctx.Value(listedAtKey{}).(time.Time)
	if !ok {
		began = s.now()
	}
	_, err = s.mutate(ctx, pool, func(jobs map[string]Record) bool {
		added, removed = 0, 0 // a retry starts over from a fresh read
		changed := false
		now := s.now()
		listed := make(map[string]bool, len(queued))
		for _, j := range queued {
			state := j.State
			if state == "" {
				state = platform.JobQueued
			}
			key := JobKey(j.ID)
			if state == platform.JobQueued || state == platform.JobWaiting {
				listed[key] = true
			}
			old, known := jobs[key]
			r, eff := applyListing(old, known, j, state, listing{began: began, now: now, minAge: minAge})
			switch eff {
			case unchanged:
				continue
			case demandAdded:
				added++
			case demandRemoved:
				removed++
			default:
				changed = true
			}
			jobs[key] = r
		}
		for id, r := range jobs {
			if !(r.State.NeedsRunner() || r.State.IsHeld()) || listed[id] || now.Sub(queuedSince(r)) < minAge {
				continue
			}
			r.Unlisted++
			changed = true
			if r.Unlisted < unlistedRepairs {
				jobs[id] = r
				continue
			}
			if r.State.NeedsRunner() {
				removed++
			}
			r.State, r.Transition, r.Presumed = platform.JobCompleted, now, true
			jobs[id] = r
		}
		return changed || added+removed > 0
	})
	if err != nil {
		return 0, 0, err
	}
	if added+removed > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Repaired job ledger", "pool", pool.Name, "added", added, "removed", removed)
	}
	return added, removed, nil
}

// unlistedRepairs is how many repair listings in a row must miss a queued job before it is
// presumed gone.
const unlistedRepairs = 2

func queuedSince(r Record) time.Time {
	if !r.FirstQueued.IsZero() {
		return r.FirstQueued
	}
	return r.Transition
}

// mutate is the read-modify-write loop every ledger write goes through: read the ConfigMap,
// let change edit the decoded records (returning whether it changed anything), prune, and
// write back with the read's resourceVersion. A conflict (or a concurrent first create) means
// another writer won; the loop re-reads and re-applies change, which must therefore be a pure
// function of the records it is given.
func (s *Store) mutate(ctx context.Context, pool *fleetv1.RunnerPool, change func(map[string]Record) bool) (bool, error) {
	if pool.UID == "" {
		return false, fmt.Errorf("runner pool %s/%s has no UID; pass the object read from the API server", pool.Namespace, pool.Name)
	}
	var lastErr error
	for attempt := 0; attempt < writeAttempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return false, err
			}
		}
		changed, err := s.tryMutate(ctx, pool, change)
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			return changed, err
		}
		lastErr = err
	}
	return false, fmt.Errorf("writing job ledger: gave up after %d conflicts: %w", writeAttempts, lastErr)
}

func (s *Store) tryMutate(ctx context.Context, pool *fleetv1.RunnerPool, change func(map[string]Record) bool) (bool, error) {
	key := ConfigMapKey(pool)
	cm := &corev1.ConfigMap{}
	exists := true
	if err := s.Client.Get(ctx, key, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading job ledger: %w", err)
		}
		exists = false
		cm = &corev1.ConfigMap{}
		cm.Namespace, cm.Name = key.Namespace, key.Name
	}
	jobs := decodeLedger(cm.Data)
	before := len(jobs)
	if !change(jobs) {
		return false, nil
	}
	data, err := s.encodeLedger(jobs, before)
	if err != nil {
		return false, err
	}
	cm.Data = data
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[fleetv1.RunnerPoolNameLabel] = pool.Name
	if err := controllerutil.SetOwnerReference(pool, cm, s.Client.Scheme()); err != nil {
		return false, err
	}
	if exists {
		return true, s.Client.Update(ctx, cm)
	}
	return true, s.Client.Create(ctx, cm)
}

// backoff grows exponentially with full jitter, so writers that collided spread out.
func backoff(attempt int) time.Duration {
	d := retryBase << min(attempt, 10)
	d = min(d, retryCap)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
