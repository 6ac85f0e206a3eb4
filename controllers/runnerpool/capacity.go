package runnerpool

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// reconcileWaitingForCapacity counts the pool's runners whose MachineClaim waits for a host with
// room, per HypervisorCluster, for the status and the Ready message.
func (r *Reconciler) reconcileWaitingForCapacity(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	listed, err := r.listing(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	perCluster := map[string]int32{}
	for i := range listed.claims {
		c := &listed.claims[i]
		if !c.DeletionTimestamp.IsZero() || c.Status.VMID != "" {
			continue
		}
		if conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition) == infrav1.NoCapacityReason {
			cluster := c.Labels[infrav1.HypervisorClusterNameLabel]
			if cluster == "" {
				cluster = c.Spec.HypervisorClusterName
			}
			perCluster[cluster]++
		}
	}
	s.waiting = nil
	for cluster, n := range perCluster {
		s.waiting = append(s.waiting, fleetv1.CapacityWait{Cluster: cluster, Count: n})
	}
	slices.SortFunc(s.waiting, func(a, b fleetv1.CapacityWait) int { return strings.Compare(a.Cluster, b.Cluster) })
	return ctrl.Result{}, nil
}

// waitingMessage says how many runners wait for capacity, and where.
func waitingMessage(waiting []fleetv1.CapacityWait) string {
	var total int32
	parts := make([]string, 0, len(waiting))
	for _, w := range waiting {
		total += w.Count
		parts = append(parts, fmt.Sprintf("%d on HypervisorCluster %s", w.Count, w.Cluster))
	}
	return fmt.Sprintf("%d waiting for capacity (%s)", total, strings.Join(parts, ", "))
}
