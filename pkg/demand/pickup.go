package demand

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Pickup is one job the ledger saw go from queued to in progress.
type Pickup struct {
	JobKey string
	// Runner is the name of the runner that took the job: a pool's runner is named like its
	// Machine, MachineClaim and BootstrapConfig.
	Runner string
	// Queued is when the job was first seen queued (to the millisecond); Started when it was seen
	// in progress.
	Queued, Started time.Time
}

// PickupObserver is told of each pickup once.
type PickupObserver interface {
	ObservePickup(ctx context.Context, pool *fleetv1.RunnerPool, p Pickup)
}

// PickupMetrics records pickups in hyperfleet_job_pickup_seconds by platform and path.
type PickupMetrics struct {
	Reader client.Reader
}

// ObservePickup classifies the pickup's path and records its latency. A runner that is not one of
// the pool's (no BootstrapConfig of its name) is not counted.
func (m PickupMetrics) ObservePickup(ctx context.Context, pool *fleetv1.RunnerPool, p Pickup) {
	path, ok, err := PickupPath(ctx, m.Reader, pool.Namespace, p)
	if err != nil || !ok {
		ctrl.LoggerFrom(ctx).V(1).Info("Pickup not counted: runner unknown", "pool", pool.Name, "runner", p.Runner, "err", err)
		return
	}
	metrics.ObservePickup(string(platform.KindOf(pool)), path, p.Started.Sub(p.Queued))
}

// PickupPath tells how the runner that took a job came to be there, from the runner's
// BootstrapConfig and MachineClaim (named like the runner):
//   - hot: the runner had attested (booted, registered) by the time the job was queued;
//   - warm: it attested later, and its VM was a warm VM the pool started (infrav1.WarmAnnotation);
//   - cold: it attested later, and its VM was cloned (for this job or another, or for the floor).
//
// Attestation times are kept to the second, so a runner that attested within the second the job
// was queued counts as hot. ok is false when the pool has no runner of that name.
func PickupPath(ctx context.Context, r client.Reader, namespace string, p Pickup) (path string, ok bool, _ error) {
	config := &bootstrapv1.BootstrapConfig{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Runner}, config); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	if at := config.Status.AttestedTime; at != nil && !at.Time.After(p.Queued) {
		return metrics.PickupHot, true, nil
	}
	claim := &infrav1.MachineClaim{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Runner}, claim); err != nil && !apierrors.IsNotFound(err) {
		return "", false, err
	}
	if infrav1.IsWarm(claim.Annotations) {
		return metrics.PickupWarm, true, nil
	}
	return metrics.PickupCold, true, nil
}
