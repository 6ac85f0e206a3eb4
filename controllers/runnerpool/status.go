package runnerpool

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// updateStatus reports the pool at a glance: desired, replicas, ready, idle, busy, queued.
func (r *Reconciler) updateStatus(s *poolScope) {
	p := s.pool
	st := &p.Status
	st.Selector = fmt.Sprintf("%s=%s", fleetv1.RunnerPoolNameLabel, p.Name)
	st.ObservedGeneration = p.Generation
	st.Platform = string(platform.KindOf(p))
	if !p.DeletionTimestamp.IsZero() || s.runners == nil && s.cluster == nil {
		return
	}
	var replicas, ready, busy, warm, done int32
	for _, rn := range s.runners {
		if rn.Deleting {
			continue
		}
		replicas++
		if rn.Warm {
			warm++
		}
		if rn.Done && rn.Ready {
			done++
		}
		if rn.Ready {
			ready++
		}
		if rn.Busy {
			busy++
		}
	}
	st.Replicas, st.ReadyReplicas, st.BusyReplicas = replicas, ready, busy
	st.IdleReplicas = max(ready-busy-done, 0) // a runner whose job is done waits for nothing
	st.QueuedJobs = int32(s.demand.Queued)
	st.WarmReplicas = int32(s.warmReady)
	// Warm VMs are runners too (they count toward maxReplicas): the target holds the warm tier.
	st.DesiredReplicas = int32(s.plan.Desired + s.plan.WarmTarget)
	st.Targets = s.targetStatus()
	st.WaitingForCapacity = s.waiting
	metrics.SetPool(p.Namespace, p.Name, int(st.DesiredReplicas), int(replicas), int(ready), int(st.IdleReplicas), int(busy), int(st.QueuedJobs))
	metrics.SetPoolWarm(p.Namespace, p.Name, s.warmReady)

	r.setHistoryRecorded(p)
	if s.plan.Limited {
		conditions.Set(p, metav1.Condition{Type: fleetv1.ScalingLimitedCondition, Status: metav1.ConditionTrue,
			Reason: fleetv1.MaxReplicasReachedReason, Message: fmt.Sprintf("demand exceeds maxReplicas %d (runners being deleted count toward it)", p.Spec.MaxReplicas)})
	} else {
		conditions.Set(p, metav1.Condition{Type: fleetv1.ScalingLimitedCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.ScaledReason})
	}
	if c := conditions.Get(p, fleetv1.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == fleetv1.PoolTemplateNotFoundReason && s.plan.Create > 0 || c.Reason == fleetv1.ClusterNotFoundReason || c.Reason == fleetv1.ClusterDeletingReason ||
			c.Reason == fleetv1.NoTargetAvailableReason && replicas < st.DesiredReplicas) {
		return // keep the condition that stopped creation
	}
	reason, msg := fleetv1.ScaledReason, fmt.Sprintf("%d/%d runners, %d ready, %d busy, %d queued", replicas, st.DesiredReplicas, ready, busy, st.QueuedJobs)
	if warm > 0 || p.Spec.WarmReplicas > 0 {
		msg += fmt.Sprintf(", %d warm (%d ready to start)", warm, s.warmReady)
	}
	switch {
	case len(s.waiting) > 0:
		// The runners exist, but some have no VM: never report the pool scaled while they wait.
		reason = fleetv1.WaitingForCapacityReason
		msg += "; " + waitingMessage(s.waiting)
	case replicas < st.DesiredReplicas:
		reason = fleetv1.ScalingUpReason
	case replicas > st.DesiredReplicas:
		reason = fleetv1.ScalingDownReason
	}
	conditions.Set(p, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
}

// reconcileTransport reports loudly when the CI platform's API is reached over plain http://: the
// InsecureTransport condition is True and a Warning Event is recorded when it becomes so.
func (r *Reconciler) reconcileTransport(_ context.Context, s *poolScope) (ctrl.Result, error) {
	p := s.pool
	pool, _ := platform.PoolOf(p)
	url, plain := pool.PlainHTTPURL()
	if !plain {
		conditions.Set(p, metav1.Condition{Type: fleetv1.InsecureTransportCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.HTTPSReason})
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("the %s API %s is reached over plain http://: credentials and tokens travel in clear text", pool.Kind, url)
	if !pool.AllowInsecureHTTP {
		msg = fmt.Sprintf("the %s API %s is http:// and allowInsecureHTTP is not set: nothing is sent there", pool.Kind, url)
	}
	if !conditions.IsTrue(p, fleetv1.InsecureTransportCondition) {
		r.Recorder.Event(p, corev1.EventTypeWarning, fleetv1.PlainHTTPReason, msg)
	}
	conditions.Set(p, metav1.Condition{Type: fleetv1.InsecureTransportCondition, Status: metav1.ConditionTrue,
		Reason: fleetv1.PlainHTTPReason, Message: msg})
	return ctrl.Result{}, nil
}

// HistoryHealth says whether the manager's job records reach the history store: ok, or since
// when and why not.
type HistoryHealth func() (ok bool, since time.Time, why string)

// setHistoryRecorded reports on every pool whether its jobs' records are being written, so that an
// outage of the history store shows where the jobs are; without a history the condition goes.
func (r *Reconciler) setHistoryRecorded(p *fleetv1.RunnerPool) {
	if r.History == nil {
		conditions.Delete(p, fleetv1.HistoryRecordedCondition)
		return
	}
	ok, since, why := r.History()
	if ok {
		conditions.Set(p, metav1.Condition{Type: fleetv1.HistoryRecordedCondition, Status: metav1.ConditionTrue,
			Reason: fleetv1.HistoryStoreReachableReason, Message: "job records are written to the history store"})
		return
	}
	conditions.Set(p, metav1.Condition{Type: fleetv1.HistoryRecordedCondition, Status: metav1.ConditionFalse,
		Reason: fleetv1.HistoryStoreUnavailableReason,
		Message: fmt.Sprintf("the history store has refused writes since %s (%s); job records wait in order and are retried, jobs are not held up",
			since.UTC().Format(time.RFC3339), why)})
}
