package machineclaim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// reconcileWarm runs for a configured VM before it is started. A held warm VM stays stopped (hold
// is true): it is cloned and configured, and the claim rests there until its pool starts it. Once
// asked to start, the VM gets its bootstrap data, which it was configured without (the join token
// in it is minted only now), and the claim marks it delivered; then the VM is started as any.
func (r *Reconciler) reconcileWarm(ctx context.Context, s *claimScope) (hold bool, _ ctrl.Result, _ error) {
	c := s.claim
	switch {
	case infrav1.IsWarmHeld(c.Annotations):
		setVMCondition(c, metav1.ConditionFalse, infrav1.WarmHeldReason,
			fmt.Sprintf("VM %s is cloned, configured and stopped: a warm VM, started when its pool needs it", claimvm.Ref(c)))
		return true, ctrl.Result{}, nil // the pool's annotation change brings us back
	case !infrav1.WarmAwaitsData(c):
		return false, ctrl.Result{}, nil
	}
	if res, err := r.loadBootstrapData(ctx, s); err != nil || !res.IsZero() {
		return true, res, err
	}
	// The rest of the configuration is on the VM already; the tags and description are written
	// again because a provider writes them with every configuration.
	var templateUserData string
	if c.Spec.CloudInit != nil {
		templateUserData = c.Spec.CloudInit.UserData
	}
	userData, err := cloudinit.Merge(templateUserData, s.bootstrapData)
	if err != nil {
		s.terminal = true
		setVMCondition(c, metav1.ConditionFalse, infrav1.ProvisioningFailedReason, err.Error())
		return true, ctrl.Result{}, nil
	}
	spec := hypervisor.ConfigSpec{
		Tags:        c.Spec.Tags,
		Description: fmt.Sprintf("HyperFleet MachineClaim %s/%s", c.Namespace, c.Name),
		CloudInit:   &hypervisor.CloudInitData{UserData: userData, MetaData: cloudinit.MetaData(string(c.UID), vmName(c))},
		// Started by the same call where the provider can, on the proof of its own write.
		Start: s.provider.Capabilities().StartOnConfigure,
	}
	task, err := s.provider.Configure(ctx, claimvm.Ref(c), spec)
	if err != nil {
		res, err := r.fail(ctx, s, fmt.Errorf("delivering the warm VM's bootstrap data: %w", err))
		return true, res, err
	}
	c.Annotations[infrav1.WarmAnnotation] = infrav1.WarmStarted
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.WarmStartingEventReason, "starting warm VM %s with its bootstrap data", claimvm.Ref(c))
	if spec.Start {
		res, err := r.recordTask(s, infrav1.TaskStart, c.Status.Node, task)
		return true, res, err
	}
	if task != "" {
		// Marked delivered already: once the task ends, the VM is started.
		res, err := r.recordTask(s, infrav1.TaskConfigure, c.Status.Node, task)
		return true, res, err
	}
	return false, ctrl.Result{}, nil
}
