package vmpool

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmpool"
)

// vmPoolAutoscaleInterval is how often an autoscaled pool is looked at without other cause, as
// the HorizontalPodAutoscaler's sync period.
const vmPoolAutoscaleInterval = 15 * time.Second

// reconcileAutoscaling sizes the pool from its VMs' use when spec.autoscaling is set: it sets
// spec.replicas (written with the pool by the deferred patch) as pkg/vmpool's Autoscale decides,
// and keeps the decision's history in status.autoscaling.
func (r *Reconciler) reconcileAutoscaling(ctx context.Context, s *vmPoolScope) (ctrl.Result, error) {
	p := s.pool
	if p.Spec.Autoscaling == nil {
		p.Status.Autoscaling = nil
		return ctrl.Result{}, nil
	}
	claims := make([]*infrav1.MachineClaim, 0, len(s.claims))
	for _, c := range s.claims {
		claims = append(claims, c)
	}
	current := ptr.Deref(p.Spec.Replicas, 1)
	usage := vmpool.Measure(claims)
	d := vmpool.Autoscale(*p.Spec.Autoscaling, p.Status.Autoscaling, vmpool.Observation{Now: r.now(), Current: current, Usage: usage})
	p.Status.Autoscaling = &d.Status
	if d.Desired != current {
		p.Spec.Replicas = ptr.To(d.Desired)
		r.Recorder.Eventf(p, corev1.EventTypeNormal, fleetv1.AutoscaledEventReason, "replicas %d → %d (CPU %s, memory %s over %d VMs)",
			current, d.Desired, percentText(d.Status.CurrentCPUUtilizationPercent), percentText(d.Status.CurrentMemoryUtilizationPercent), usage.VMs)
		ctrl.LoggerFrom(ctx).Info("autoscaled", "from", current, "to", d.Desired)
	}
	s.recheckIn(vmPoolAutoscaleInterval)
	return ctrl.Result{}, nil
}

func percentText(p *int32) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("%d%%", *p)
}
