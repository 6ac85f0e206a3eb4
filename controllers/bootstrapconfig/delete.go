package bootstrapconfig

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// reconcileDelete releases what a SPIRE-attested Machine left on the SPIRE server (its
// registration entries and attested agent) before the config goes; the data Secret goes with its
// owner. A paused Cluster is being moved: its entries stay for the Machine's new home.
func (r *Reconciler) reconcileDelete(ctx context.Context, c *bootstrapv1.BootstrapConfig) (ctrl.Result, error) {
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
		r.Recorder.Eventf(c, corev1.EventTypeWarning, bootstrapv1.SPIREReleaseFailedReason, "releasing %s on the SPIRE server: %v", c.Status.SPIFFEID, err)
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
