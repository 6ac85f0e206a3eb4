package bootstrapconfig

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// reconcileWarmHold keeps a warm runner's config from minting its join token while its VM sits
// stopped: the token is minted when the pool starts the VM (and removes the hold), so it is valid
// for the boot only, however long the VM waited. A config whose data was written already is not
// held back: its token exists.
func (r *Reconciler) reconcileWarmHold(_ context.Context, s *bootstrapScope) (ctrl.Result, error) {
	c := s.config
	if c.Annotations[bootstrapv1.WarmHoldAnnotation] == "" || dataSecretCreated(c) {
		return ctrl.Result{}, nil
	}
	setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.WarmHeldReason,
		"held for a warm VM: the join token is minted when the RunnerPool starts the VM")
	// Stop here; the pool's removal of the annotation brings us back long before the requeue.
	return ctrl.Result{RequeueAfter: 10 * time.Minute}, nil
}
