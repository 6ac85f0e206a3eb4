package machineclaim

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// reconcileSpentSeed removes the VM's cloud-init seed once the join token in it is spent
// (redeemed or expired): the ISO is ejected from the running VM and deleted from storage, so the
// token does not outlive its use on the hypervisor's storage or in the guest's CD-ROM. Only a
// HyperFleet BootstrapConfig says when its token is spent; other claims keep their seed.
func (r *Reconciler) reconcileSpentSeed(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if c.Status.CloudInitEjectedTime != nil || c.Status.CompletedStep != infrav1.StepStarted || c.Status.Task != nil || s.provider == nil {
		return ctrl.Result{}, nil
	}
	ref := bootstrapRef(s.machine)
	if ref == nil {
		return ctrl.Result{}, nil
	}
	config := &bootstrapv1.BootstrapConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, config); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	spent, wait := joinTokenSpent(config, time.Now())
	if !spent {
		if wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, nil // the BootstrapConfig watch brings us back
	}
	if err := s.provider.EjectCloudInit(ctx, claimvm.Ref(c)); err != nil {
		if errors.Is(err, hypervisor.ErrNotFound) {
			return ctrl.Result{}, nil // the VM is gone: the sweep retires the claim
		}
		ctrl.LoggerFrom(ctx).Info("removing the spent cloud-init seed failed; retrying", "error", err.Error())
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	c.Status.CloudInitEjectedTime = &metav1.Time{Time: time.Now()}
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.CloudInitEjectedEventReason,
		"the join token is spent: cloud-init ISO of VM %s ejected and deleted", claimvm.Ref(c))
	return ctrl.Result{}, nil
}

// joinTokenSpent reports whether a BootstrapConfig's join token can no longer be redeemed, and
// otherwise how long until it expires (zero when unknown).
func joinTokenSpent(c *bootstrapv1.BootstrapConfig, now time.Time) (bool, time.Duration) {
	switch reason := conditions.GetReason(c, bootstrapv1.AttestedCondition); {
	case c.Status.AttestedTime != nil,
		c.Status.JoinToken != nil && c.Status.JoinToken.RedeemedTime != nil,
		reason == bootstrapv1.TokenRedeemedReason, reason == bootstrapv1.TokenExpiredReason:
		return true, 0
	}
	if exp := c.Status.TokenExpirationTime; exp != nil {
		if !now.Before(exp.Time) {
			return true, 0
		}
		return false, exp.Sub(now) + time.Second
	}
	return false, 0
}
