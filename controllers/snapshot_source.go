package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// claimVM is a MachineClaim whose VM a snapshot, restore, schedule or migration acts on.
type claimVM struct {
	claim *infrav1.MachineClaim
	// hcGone is set when the claim's HypervisorCluster no longer exists.
	hcGone   bool
	hc       *infrav1.HypervisorCluster
	provider hypervisor.Provider
	snapper  hypervisor.Snapshotter
}

func (v *claimVM) ref() hypervisor.VMRef { return vmRef(v.claim) }

// vmID is the claim's VM ID as snapshots record it: the hypervisor's ID as text.
func (v *claimVM) vmID() string { return v.claim.Status.VMID }

// notReady says why a claim's VM cannot be acted on yet: a reason from api/hyperfleet and a message.
type notReady struct{ reason, message string }

func (n *notReady) Error() string { return n.message }

// resolveClaimVM finds the claim named in namespace, its VM and its provider. It returns a
// *notReady error for conditions worth waiting on, and the claim with hcGone for a claim whose
// HypervisorCluster is gone. Only the claim's own namespace is looked at: a snapshot never reaches
// another tenant's VM.
func resolveClaimVM(ctx context.Context, c client.Client, registry *connection.Registry, namespace, name string) (*claimVM, error) {
	v, err := resolveClaimProvider(ctx, c, registry, namespace, name)
	if err != nil {
		return v, err
	}
	s, ok := v.provider.(hypervisor.Snapshotter)
	if !ok {
		return v, &notReady{fleetv1.SnapshotsUnsupportedReason, fmt.Sprintf("HypervisorCluster %s's provider cannot take snapshots", v.hc.Name)}
	}
	v.snapper = s
	return v, nil
}

// resolveClaimProvider is resolveClaimVM without asking for snapshots: the claim, its
// HypervisorCluster and its provider.
func resolveClaimProvider(ctx context.Context, c client.Client, registry *connection.Registry, namespace, name string) (*claimVM, error) {
	claim := &infrav1.MachineClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &notReady{fleetv1.SourceNotFoundReason, fmt.Sprintf("MachineClaim %s not found in namespace %s", name, namespace)}
		}
		return nil, err
	}
	v := &claimVM{claim: claim}
	if conditions.IsTrue(claim, infrav1.PausedCondition) {
		// The claim's Cluster is paused (clusterctl move pauses it): its VM is not ours to act on
		// until it resumes, here or in the cluster it moves to.
		return v, &notReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("MachineClaim %s is paused", name)}
	}
	if claim.Status.VMID == "" || claim.Status.CompletedStep != infrav1.StepStarted || claim.Status.Node == "" {
		return v, &notReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("MachineClaim %s has no provisioned VM yet", name)}
	}
	hcName := claim.Labels[infrav1.HypervisorClusterNameLabel]
	hc := &infrav1.HypervisorCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hcName}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			v.hcGone = true
			return v, &notReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %q of MachineClaim %s not found", hcName, name)}
		}
		return nil, err
	}
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		return v, &notReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %s is not available: %s", hc.Name,
			conditions.GetMessage(hc, infrav1.HypervisorClusterAvailableCondition))}
	}
	p, err := registry.Get(ctx, hc)
	if err != nil {
		return v, &notReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %s: %v", hc.Name, err)}
	}
	v.provider, v.hc = p, hc
	return v, nil
}

// setOwnerClaim adds claim as a (non-controller) owner of obj unless it is one already, so
// clusterctl move takes obj with its claim and deleting the claim deletes obj.
func setOwnerClaim(c client.Client, obj client.Object, claim *infrav1.MachineClaim) error {
	return controllerutil.SetOwnerReference(claim, obj, c.Scheme())
}
