package runnerpool

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// targetFailureWindow is how long a provisioning failure of a runner that is not ready yet keeps
// its target Failing; the target is used again as soon as that runner provisions or goes.
const targetFailureWindow = 5 * time.Minute

// targetRecheck is how soon a pool with a skipped target looks again (status changes of Clusters,
// HypervisorClusters and claims wake it sooner).
const targetRecheck = 15 * time.Second

// runnerTarget is where one new runner goes: its Machine's Cluster, the MachineClaimTemplate of
// its claim and, for a pool with targets, the target's name.
type runnerTarget struct {
	name, clusterName, claimTemplate string
}

// reconcileTargets reads, for a pool with spec.template.targets, each target's runners and whether
// it takes new ones: Down when its Cluster or HypervisorCluster is missing or not Available, Full
// when one of its runners waits for capacity, Failing when one failed to provision recently.
func (r *Reconciler) reconcileTargets(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	specs := s.pool.Spec.Template.Targets
	s.targets = nil
	if len(specs) == 0 {
		return ctrl.Result{}, nil
	}
	listed, err := r.listing(ctx, s)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the pool's claims: %w", err)
	}
	for _, spec := range specs {
		t := placement.Target{Name: spec.Name, Priority: spec.Priority, Weight: spec.Weight, State: placement.TargetReady}
		for _, m := range s.machines {
			if m.Labels[fleetv1.RunnerTargetLabel] == spec.Name && m.DeletionTimestamp.IsZero() {
				t.Runners++
			}
		}
		t.State, t.Reason = r.targetHealth(ctx, s.pool.Namespace, spec, listed.claims)
		s.targets = append(s.targets, t)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) targetHealth(ctx context.Context, ns string, spec fleetv1.RunnerTarget, claims []infrav1.MachineClaim) (placement.TargetState, string) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.ClusterName}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return placement.TargetDown, fmt.Sprintf("Cluster %s not found", spec.ClusterName)
		}
		return placement.TargetDown, fmt.Sprintf("reading Cluster %s: %v", spec.ClusterName, err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return placement.TargetDown, fmt.Sprintf("Cluster %s is being deleted", spec.ClusterName)
	}
	if ref := cluster.Spec.InfrastructureRef; ref.Kind != "HypervisorCluster" {
		return placement.TargetDown, fmt.Sprintf("Cluster %s has no HypervisorCluster as its infrastructure", spec.ClusterName)
	}
	hc := &infrav1.HypervisorCluster{}
	hcName := cluster.Spec.InfrastructureRef.Name
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hcName}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			return placement.TargetDown, fmt.Sprintf("HypervisorCluster %s not found", hcName)
		}
		return placement.TargetDown, fmt.Sprintf("reading HypervisorCluster %s: %v", hcName, err)
	}
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		return placement.TargetDown, fmt.Sprintf("HypervisorCluster %s is not available: %s", hcName,
			conditions.GetMessage(hc, infrav1.HypervisorClusterAvailableCondition))
	}
	for i := range claims {
		c := &claims[i]
		if c.Labels[fleetv1.RunnerTargetLabel] != spec.Name || !c.DeletionTimestamp.IsZero() || c.Status.Phase == infrav1.MachineClaimPhaseReady {
			continue
		}
		cond := conditions.Get(c, infrav1.MachineClaimVMProvisionedCondition)
		if cond != nil && cond.Reason == infrav1.NoCapacityReason {
			return placement.TargetFull, fmt.Sprintf("MachineClaim %s waits for capacity: %s", c.Name, cond.Message)
		}
		if t := c.Status.LastFailureTime; t != nil && time.Since(t.Time) < targetFailureWindow && c.Status.Phase != infrav1.MachineClaimPhaseReady {
			msg := "provisioning failed"
			if cond != nil {
				msg = cond.Message
			}
			return placement.TargetFailing, fmt.Sprintf("MachineClaim %s failed to provision: %s", c.Name, msg)
		}
	}
	return placement.TargetReady, ""
}

// nextTarget says where the next runner goes: the pool's own Cluster and template without
// targets, otherwise the target placement.ChooseTarget picks (counted at once, so a burst spreads
// the way the policy says).
func (s *poolScope) nextTarget() (runnerTarget, error) {
	p := s.pool
	if len(p.Spec.Template.Targets) == 0 {
		return runnerTarget{clusterName: p.Spec.ClusterName, claimTemplate: p.Spec.Template.InfrastructureRef.Name}, nil
	}
	i, err := placement.ChooseTarget(s.targets)
	if err != nil {
		return runnerTarget{}, err
	}
	spec := p.Spec.Template.Targets[i]
	return runnerTarget{name: spec.Name, clusterName: spec.ClusterName, claimTemplate: spec.InfrastructureRef.Name}, nil
}

// placed counts a runner just created on target.
func (s *poolScope) placed(target string) {
	for i := range s.targets {
		if s.targets[i].Name == target {
			s.targets[i].Runners++
		}
	}
}

// targetStatus is status.targets from what reconcileTargets read.
func (s *poolScope) targetStatus() []fleetv1.RunnerTargetStatus {
	var out []fleetv1.RunnerTargetStatus
	for _, t := range s.targets {
		out = append(out, fleetv1.RunnerTargetStatus{Name: t.Name, Replicas: int32(t.Runners), State: string(t.State), Message: condition.Truncate(t.Reason, 1024)})
	}
	return out
}

// skipsTargets reports whether some target is skipped, so the pool looks again soon.
func (s *poolScope) skipsTargets() bool {
	for _, t := range s.targets {
		if t.State != placement.TargetReady {
			return true
		}
	}
	return false
}

// targetsOfCluster reports whether the pool's runners may belong to Cluster name.
func targetsOfCluster(p *fleetv1.RunnerPool, name string) bool {
	if p.Spec.ClusterName == name {
		return true
	}
	for _, t := range p.Spec.Template.Targets {
		if t.ClusterName == name {
			return true
		}
	}
	return false
}

// hypervisorClusterToPools wakes the namespace's pools with targets when a HypervisorCluster's
// availability may have changed.
func (r *Reconciler) hypervisorClusterToPools(ctx context.Context, o client.Object) []ctrl.Request {
	pools := &fleetv1.RunnerPoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for _, p := range pools.Items {
		if len(p.Spec.Template.Targets) > 0 {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return reqs
}
