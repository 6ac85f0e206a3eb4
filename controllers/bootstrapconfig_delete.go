package controllers

import (
	"context"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// reconcileDelete releases what a SPIRE-attested Machine left on the SPIRE server (its
// registration entries and attested agent) before the config goes; the data Secret goes with its
// owner. A paused Cluster is being moved: its entries stay for the Machine's new home.
func (r *BootstrapConfigReconciler) reconcileDelete(ctx context.Context, c *bootstrapv1.BootstrapConfig) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, bootstrapv1.SPIREFinalizer) {
		return ctrl.Result{}, nil
	}
	if cluster, err := util.GetClusterFromMetadata(ctx, r.Client, c.ObjectMeta); err == nil && annotations.IsPaused(cluster, c) {
		return ctrl.Result{}, nil
	}
	helper, err := patch.NewHelper(c, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseSPIRE(ctx, c); err != nil {
		r.Recorder.Eventf(c, "Warning", bootstrapv1.SPIREReleaseFailedReason, "releasing %s on the SPIRE server: %v", c.Status.SPIFFEID, err)
		conditions.Set(c, metav1.Condition{Type: bootstrapv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: bootstrapv1.SPIREReleaseFailedReason, Message: err.Error(), ObservedGeneration: c.Generation})
		if perr := helper.Patch(ctx, c, patch.WithOwnedConditions{Conditions: []string{bootstrapv1.ReadyCondition}}); perr != nil {
			ctrl.LoggerFrom(ctx).Error(perr, "recording the release failure")
		}
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(c, bootstrapv1.SPIREFinalizer)
	return ctrl.Result{}, helper.Patch(ctx, c)
}

// spireRedeemed asks the config's SPIRE server whether an agent attested with its join token.
func (r *BootstrapConfigReconciler) spireRedeemed(ctx context.Context, c *bootstrapv1.BootstrapConfig) (bool, error) {
	id, m, err := recordedMachine(c)
	if err != nil || r.SPIREProvisioner == nil {
		return false, err
	}
	p, err := r.provisionerFor(ctx, c)
	if err != nil {
		return false, err
	}
	checker, ok := p.(identity.RedemptionChecker)
	if !ok {
		return false, nil
	}
	return checker.Redeemed(ctx, id.TrustDomain(), m)
}

// recordedMachine is the SPIFFE ID recorded in status and the Machine it names.
func recordedMachine(c *bootstrapv1.BootstrapConfig) (spiffeid.ID, identity.Machine, error) {
	id, err := spiffeid.FromString(c.Status.SPIFFEID)
	if err != nil {
		return spiffeid.ID{}, identity.Machine{}, fmt.Errorf("status.spiffeID: %w", err)
	}
	ns, name, err := identity.ParseMachineID(id.TrustDomain(), id)
	if err != nil {
		return spiffeid.ID{}, identity.Machine{}, fmt.Errorf("status.spiffeID: %w", err)
	}
	return id, identity.Machine{Namespace: ns, Name: name}, nil
}

// releaseSPIRE deletes the entries and agent registered for the SPIFFE ID recorded in status. With
// none recorded nothing was registered; with SPIRE no longer enabled on this manager nothing can be
// done, and the config must not hang on that.
func (r *BootstrapConfigReconciler) releaseSPIRE(ctx context.Context, c *bootstrapv1.BootstrapConfig) error {
	if c.Status.SPIFFEID == "" {
		return nil
	}
	if r.SPIREProvisioner == nil {
		r.Recorder.Eventf(c, "Warning", bootstrapv1.SPIREReleaseFailedReason,
			"provider SPIRE is not enabled on this manager: the registration entries of %s stay on the SPIRE server", c.Status.SPIFFEID)
		return nil
	}
	id, m, err := recordedMachine(c)
	if err != nil {
		return err
	}
	p, err := r.provisionerFor(ctx, c)
	if err != nil {
		return err
	}
	releaser, ok := p.(identity.Releaser)
	if !ok {
		return nil
	}
	if err := releaser.Release(ctx, id.TrustDomain(), m); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released the machine on the SPIRE server", "spiffeID", id.String())
	return nil
}
