package webhook

import (
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"

	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// +kubebuilder:rbac:groups=hyperfleet.io,resources=runnerpools,verbs=get;list;watch

// processAttempts bounds retries of an event when the API server fails; conflicts are already
// retried inside the Store.
const processAttempts = 3

// Start runs the workers until ctx is done, as a controller-runtime manager.Runnable. Events
// still queued then are dropped; the repair loop recovers them. Calling Start twice (e.g. via
// the manager and ListenAndServe) runs one set of workers.
func (r *Receiver) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil
	}
	defer r.started.Store(false)
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() { r.work(ctx) })
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection is false: every replica receives webhooks and the ledger arbitrates.
func (r *Receiver) NeedLeaderElection() bool { return false }

func (r *Receiver) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case item := <-r.queue:
			r.process(ctx, item)
		}
	}
}

func (r *Receiver) process(ctx context.Context, item queuedEvent) {
	ev := item.event
	log := ctrl.LoggerFrom(ctx).WithValues("platform", item.kind, "delivery", ev.DeliveryID, "job", ev.JobID, "action", ev.State, "repository", ev.Repository)
	result := Processed{Event: ev, ReceivedAt: item.receivedAt}
	defer func() {
		if r.cfg.OnProcessed != nil {
			r.cfg.OnProcessed(result)
		}
	}()

	var pool *fleetv1.RunnerPool
	for attempt := range processAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		pool, result.Changed, result.Err = r.record(ctx, item)
		if result.Err == nil || ctx.Err() != nil {
			break
		}
	}
	switch {
	case result.Err != nil:
		r.stats.failed.Add(1)
		metrics.WebhookDelivery(metrics.WebhookError)
		r.recent.forget(string(item.kind) + "/" + ev.DeliveryID) // let a redelivery try again
		log.Error(result.Err, "Could not record job event; the repair loop will recover it")
	case pool == nil:
		// Every workflow_job of the App's repositories arrives here, GitHub-hosted ones too.
		r.stats.unrouted.Add(1)
		metrics.WebhookDelivery(metrics.WebhookIgnored)
		log.V(1).Info("No RunnerPool serves this job; dropped", "labels", ev.Labels)
	case result.Changed:
		r.stats.recorded.Add(1)
		metrics.WebhookDelivery(metrics.WebhookAccepted)
		if ev.State == platform.JobInProgress && !ev.CreatedAt.IsZero() && ev.StartedAt.After(ev.CreatedAt) {
			metrics.ObserveJobPickup(ev.StartedAt.Sub(ev.CreatedAt))
		}
		result.Pool = types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
		log.V(1).Info("Recorded job event", "pool", result.Pool, "latency", time.Since(item.receivedAt))
		if r.notify != nil {
			r.notify(result.Pool)
		}
	default:
		r.stats.unchanged.Add(1)
		metrics.WebhookDelivery(metrics.WebhookDuplicate)
		result.Pool = types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	}
}

// record routes the event to its pool and applies it to that pool's ledger; pool is nil when
// no pool serves the job.
//
// A job goes to the pool that owns it (demand.Claims): the first pool, by webhook or repair loop,
// to have claimed it. An unclaimed job is claimed for the best-ranked pool of the delivery's
// platform (demand.RankPools) whose credentials prove they hold the installation the verified
// delivery names: a pool of another platform, App, instance or organization, in whatever
// namespace, never sees the job.
func (r *Receiver) record(ctx context.Context, item queuedEvent) (*fleetv1.RunnerPool, bool, error) {
	ev := item.event
	if ev.Installation == "" || r.cfg.Installations == nil || r.cfg.Claims == nil {
		return nil, false, nil // a delivery that names no installation proves no owner
	}
	pools := &fleetv1.RunnerPoolList{}
	var opts []client.ListOption
	if r.cfg.Namespace != "" {
		opts = append(opts, client.InNamespace(r.cfg.Namespace))
	}
	if err := r.client.List(ctx, pools, opts...); err != nil {
		return nil, false, fmt.Errorf("listing RunnerPools: %w", err)
	}
	// A job already claimed goes to its owner: it proved the installation when it claimed.
	if owner, found, err := r.cfg.Claims.Owner(ctx, ev.Installation, ev.JobID); err != nil {
		return nil, false, err
	} else if found {
		for i := range pools.Items {
			if p := &pools.Items[i]; owner.Is(p) && p.DeletionTimestamp.IsZero() && platform.KindOf(p) == item.kind {
				changed, err := r.store.Record(demand.WithObservedAt(ctx, item.receivedAt), p, ev)
				if err != nil {
					return p, false, fmt.Errorf("recording in pool %s/%s: %w", p.Namespace, p.Name, err)
				}
				return p, changed, nil
			}
		}
	}
	if ev.LabelsUnknown {
		labels, err := r.readLabels(ctx, pools.Items, item.kind, ev)
		if err != nil {
			return nil, false, err
		}
		ev.Labels, ev.LabelsUnknown = labels, false
	}
	var pool *fleetv1.RunnerPool
	for _, candidate := range demand.RankPools(pools.Items, item.kind, ev.Repository, ev.Labels) {
		installation, err := r.cfg.Installations.Installation(ctx, candidate)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Pool cannot prove its installation; skipped", "pool", klog(candidate), "reason", err.Error())
			continue
		}
		if installation == ev.Installation {
			pool = candidate
			break
		}
	}
	if pool == nil {
		return nil, false, nil
	}
	owner, err := r.cfg.Claims.Claim(ctx, ev.Installation, ev.JobID, pool)
	if err != nil {
		return nil, false, err
	}
	if !owner.Is(pool) {
		pool = nil
		for i := range pools.Items {
			if owner.Is(&pools.Items[i]) && platform.KindOf(&pools.Items[i]) == item.kind {
				pool = &pools.Items[i]
			}
		}
		if pool == nil {
			return nil, false, fmt.Errorf("job %s is claimed by pool %s, which this receiver cannot see", ev.JobID, owner.NamespacedName)
		}
	}
	changed, err := r.store.Record(demand.WithObservedAt(ctx, item.receivedAt), pool, ev)
	if err != nil {
		return pool, false, fmt.Errorf("recording in pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	return pool, changed, nil
}

// JobReader reads a job through a pool's platform; the manager's platform.Source is one.
type JobReader interface {
	Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error)
}

// readLabels learns the labels of a job whose delivery does not carry them (GitLab's Job Hooks)
// by reading the job through the first pool of its platform whose scope holds the job's
// repository and whose credentials prove the delivery's installation. The read costs one API call
// per unclaimed job: once routed, a job's later deliveries go to its owner without one. No such
// pool, or no reader, leaves the labels empty, and the job goes unrouted until the repair loop
// lists it with its labels.
func (r *Receiver) readLabels(ctx context.Context, pools []fleetv1.RunnerPool, kind platform.Kind, ev platform.JobEvent) ([]string, error) {
	reader, ok := r.cfg.Installations.(JobReader)
	if !ok {
		return nil, nil
	}
	var lastErr error
	for i := range pools {
		p := &pools[i]
		neutral, ok := platform.PoolOf(p)
		if !ok || neutral.Kind != kind || !p.DeletionTimestamp.IsZero() || !neutral.Scope.Contains(ev.Repository) {
			continue
		}
		if installation, err := r.cfg.Installations.Installation(ctx, p); err != nil || installation != ev.Installation {
			continue
		}
		plat, _, err := reader.Platform(ctx, p)
		if err != nil {
			lastErr = err
			continue
		}
		job, err := plat.GetJob(ctx, platform.Scope{Repository: ev.Repository}, ev.JobID)
		if err != nil {
			lastErr = err
			continue
		}
		return job.Labels, nil
	}
	if lastErr != nil && platform.IsRetryable(lastErr) {
		return nil, fmt.Errorf("reading the labels of job %s: %w", ev.JobID, lastErr)
	}
	return nil, nil
}

func klog(p *fleetv1.RunnerPool) string { return p.Namespace + "/" + p.Name }
