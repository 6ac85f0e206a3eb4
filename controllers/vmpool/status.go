package vmpool

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmpool"
)

// updateStatus reports the pool's VMs, its Ready and Progressing conditions and its metrics.
func (r *Reconciler) updateStatus(s *vmPoolScope) {
	p := s.pool
	st := &p.Status
	if !s.listed {
		return
	}
	replicas := ptr.Deref(p.Spec.Replicas, 1)
	c := vmpool.Count(s.vms)
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas =
		int32(c.Live), int32(c.Ready), int32(c.Available), int32(c.Updated)
	st.UnavailableReplicas = max(replicas-st.AvailableReplicas, 0)
	st.VMs = st.VMs[:0]
	for _, vm := range s.vms {
		claim := s.claims[vm.Name]
		st.VMs = append(st.VMs, fleetv1.VMStatus{
			Name: vm.Name, Phase: claim.Status.Phase, Node: claim.Status.Node,
			Ready: vm.Ready, Available: vm.Available, Updated: vm.Updated, Deleting: vm.Deleting,
			Addresses: claim.Status.Addresses,
		})
	}
	slices.SortFunc(st.VMs, func(a, b fleetv1.VMStatus) int { return strings.Compare(a.Name, b.Name) })

	if !p.DeletionTimestamp.IsZero() {
		return
	}
	claims := make([]*infrav1.MachineClaim, 0, len(s.claims))
	for _, cl := range s.claims {
		claims = append(claims, cl)
	}
	u := vmpool.Measure(claims)
	metrics.SetVMPool(p.Namespace, p.Name, metrics.VMPoolCounts{
		Desired: int(replicas), Current: c.Live, Ready: c.Ready, Available: c.Available,
		Updated: c.Updated, Unavailable: int(st.UnavailableReplicas),
	}, u.CPU, u.Memory)

	deletingOutdated, deleting := 0, 0
	for _, vm := range s.vms {
		if vm.Deleting {
			deleting++
			if !vm.Updated {
				deletingOutdated++
			}
		}
	}
	progress := metav1.Condition{Type: fleetv1.ProgressingCondition, Status: metav1.ConditionTrue}
	switch {
	case c.Outdated > 0 || deletingOutdated > 0:
		progress.Reason = fleetv1.VMPoolRollingUpdateReason
		if p.Spec.Strategy.Type == fleetv1.RecreateVMPoolStrategy {
			progress.Reason = fleetv1.VMPoolRecreatingReason
		}
		progress.Message = fmt.Sprintf("%d of %d VMs updated, %d outdated VM(s) left", c.Updated, replicas, c.Outdated+deletingOutdated)
	case c.Live < int(replicas):
		progress.Reason = fleetv1.VMPoolScalingUpReason
		progress.Message = fmt.Sprintf("%d of %d VMs exist", c.Live, replicas)
	case c.Live > int(replicas) || deleting > 0:
		progress.Reason = fleetv1.VMPoolScalingDownReason
		progress.Message = fmt.Sprintf("%d VMs exist, %d wanted, %d being deleted", c.Live, replicas, deleting)
	case c.Available < int(replicas):
		progress.Reason = fleetv1.VMPoolWaitingForVMsReason
		progress.Message = fmt.Sprintf("%d of %d VMs available", c.Available, replicas)
	default:
		progress.Status, progress.Reason = metav1.ConditionFalse, fleetv1.VMPoolCompleteReason
		progress.Message = fmt.Sprintf("%d VMs of template %s", replicas, s.hash)
	}
	r.judgeProgress(s, c, &progress)
	conditions.Set(p, progress)

	if cur := conditions.Get(p, fleetv1.ReadyCondition); cur != nil && cur.Status == metav1.ConditionFalse &&
		(cur.Reason == fleetv1.VMPoolSelectorMismatchReason && s.hash == "" || cur.Reason == fleetv1.VMPoolCreateFailedReason && c.Live < int(replicas)) {
		return // keep the condition that stopped the pool
	}
	if c.Available >= int(replicas) {
		conditions.Set(p, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionTrue,
			Reason: fleetv1.VMPoolAvailableReason, Message: fmt.Sprintf("%d/%d VMs available", c.Available, replicas)})
		return
	}
	conditions.Set(p, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: fleetv1.VMPoolUnavailableReason, Message: fmt.Sprintf("%d/%d VMs available", c.Available, replicas)})
}

// judgeProgress records when the pool last moved forward and, for a pool still under way that has
// not moved for spec.progressDeadlineSeconds, turns Progressing False with reason
// ProgressDeadlineExceeded (once, with a Warning Event), as a Deployment's controller does. The
// rollout itself goes on: the condition is for people and alerts.
func (r *Reconciler) judgeProgress(s *vmPoolScope, c vmpool.Counts, progress *metav1.Condition) {
	p, now := s.pool, r.now()
	if st := &p.Status; st.LastProgressTime == nil || vmpool.Progressed(s.before, vmpool.ProgressOf(s.hash, c)) {
		st.LastProgressTime = &metav1.Time{Time: now}
	}
	if progress.Status != metav1.ConditionTrue {
		return // complete
	}
	deadline := time.Duration(ptr.Deref(p.Spec.ProgressDeadlineSeconds, 600)) * time.Second
	over, left := vmpool.DeadlineExceeded(p.Status.LastProgressTime.Time, deadline, now)
	if !over {
		s.deadlineIn = left + 100*time.Millisecond
		return
	}
	if conditions.GetReason(p, fleetv1.ProgressingCondition) != fleetv1.VMPoolProgressDeadlineExceededReason {
		r.Recorder.Eventf(p, corev1.EventTypeWarning, fleetv1.VMPoolProgressDeadlineExceededReason,
			"no progress for %s: %s", deadline, progress.Message)
	}
	progress.Status, progress.Reason = metav1.ConditionFalse, fleetv1.VMPoolProgressDeadlineExceededReason
	progress.Message = fmt.Sprintf("no progress for %s: %s", deadline, progress.Message)
}
