package machineclaim

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
)

// reconcileBootstrapped owns BootstrapReady. When the owner Machine's bootstrap is a HyperFleet
// BootstrapConfig, the claim is Ready only once the VM's agent has proved its identity and fetched
// its runner configuration; a VM that merely runs is not yet a runner. Other bootstrap providers
// (and standalone claims) have no such signal, so the running VM is enough.
func (r *Reconciler) reconcileBootstrapped(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if !ptr.Deref(ptr.Deref(c.Status.Initialization, infrav1.MachineClaimInitializationStatus{}).Provisioned, false) {
		return ctrl.Result{}, nil
	}
	ref := bootstrapRef(s.machine)
	if ref == nil {
		conditions.Delete(c, infrav1.MachineClaimBootstrapReadyCondition)
		return ctrl.Result{}, nil
	}
	config := &bootstrapv1.BootstrapConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, config); err != nil {
		if apierrors.IsNotFound(err) {
			setBootstrapCondition(c, metav1.ConditionFalse, infrav1.WaitingForBootstrapReason, fmt.Sprintf("BootstrapConfig %s not found", ref.Name))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if config.Status.AttestedTime == nil {
		setBootstrapCondition(c, metav1.ConditionFalse, infrav1.WaitingForBootstrapReason,
			"VM is running; waiting for its agent to prove its identity and fetch its runner configuration")
		return ctrl.Result{}, nil // the BootstrapConfig watch brings us back
	}
	if c.Status.BootstrappedTime == nil {
		c.Status.BootstrappedTime = config.Status.AttestedTime.DeepCopy()
		r.history().VMAttested(c, config)
		ctrl.LoggerFrom(ctx).Info("runner bootstrapped", "after", c.Status.BootstrappedTime.Sub(c.CreationTimestamp.Time).Round(time.Second))
	}
	setBootstrapCondition(c, metav1.ConditionTrue, infrav1.BootstrappedReason,
		fmt.Sprintf("agent attested at %s", config.Status.AttestedTime.UTC().Format(time.RFC3339)))
	return ctrl.Result{}, nil
}

// maxRunnerAddressReads bounds the reads of a runner's addresses: about a minute of backoff at the
// default interval, after which a guest agent that never answered is not asked again.
const maxRunnerAddressReads = 6

// reconcileRunnerAddresses reads a runner's addresses once its agent has attested: the guest is up
// by then, so the first read of its guest agent usually answers, where polling it from the start
// took several failing reads per VM while the guest booted. The runner is Ready without them; a
// guest agent that does not answer yet is asked again with backoff.
func (r *Reconciler) reconcileRunnerAddresses(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if c.Status.BootstrappedTime == nil || bootstrapRef(s.machine) == nil || len(c.Status.Addresses) > 0 ||
		s.provider == nil || c.Status.Task != nil || c.Status.CompletedStep != infrav1.StepStarted {
		return ctrl.Result{}, nil
	}
	if r.polls.reads(c.UID, addressPollKey) >= maxRunnerAddressReads {
		return ctrl.Result{}, nil // a template without the guest agent: the runner works without
	}
	if wait := r.polls.until(c.UID, addressPollKey, time.Time{}, 0, r.poll()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	addrs, err := s.provider.Addresses(ctx, claimvm.Ref(c))
	r.polls.read(c.UID, addressPollKey)
	if err != nil || len(addrs) == 0 {
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("reading the runner's addresses failed; retrying", "error", err.Error())
		}
		return ctrl.Result{RequeueAfter: r.polls.next(c.UID, addressPollKey, r.poll())}, nil
	}
	r.polls.done(c.UID)
	setAddresses(c, addrs)
	setVMCondition(c, metav1.ConditionTrue, infrav1.VMRunningReason, fmt.Sprintf("VM %s running at %s", claimvm.Ref(c), addrs[0].Address))
	return ctrl.Result{}, nil
}

func bootstrapRef(m *clusterv1.Machine) *clusterv1.ContractVersionedObjectReference {
	if m == nil {
		return nil
	}
	ref := m.Spec.Bootstrap.ConfigRef
	if !ref.IsDefined() || ref.Kind != "BootstrapConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group {
		return nil
	}
	return &ref
}

func setBootstrapCondition(c *infrav1.MachineClaim, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(c, metav1.Condition{Type: infrav1.MachineClaimBootstrapReadyCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

// bootstrapConfigToClaim wakes the claim of the Machine that owns a BootstrapConfig, so attestation
// turns the claim Ready at once.
func (r *Reconciler) bootstrapConfigToClaim(ctx context.Context, o client.Object) []ctrl.Request {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind != "Machine" {
			continue
		}
		m := &clusterv1.Machine{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, m); err != nil {
			return nil
		}
		if infra := m.Spec.InfrastructureRef; infra.Kind == "MachineClaim" {
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: infra.Name}}}
		}
	}
	return nil
}

// holdJoinToken marks the Machine's HyperFleet BootstrapConfig (BootstrapDataDeliveredAnnotation)
// before the claim reads its data Secret for a VM, so the join token in it is not replaced once a
// VM may hold it, and returns the token's hash as the config records it, which the Secret must
// carry. The mark is written with the resourceVersion just read (past the cache): a replacement
// records its new hash the same way, so either the mark wins and nothing is replaced, or the
// replacement wins, the mark is written on the newer version, and the claim waits until the
// Secret carries the new token. Other bootstrap providers have nothing to hold: "".
func (r *Reconciler) holdJoinToken(ctx context.Context, s *claimScope) (string, error) {
	ref := bootstrapRef(s.machine)
	if ref == nil {
		return "", nil
	}
	key := client.ObjectKey{Namespace: s.claim.Namespace, Name: ref.Name}
	config := &bootstrapv1.BootstrapConfig{}
	// A cached copy that carries the mark is no older than the mark, so its hash is the one held.
	if err := r.Client.Get(ctx, key, config); err == nil {
		if _, held := config.Annotations[bootstrapv1.BootstrapDataDeliveredAnnotation]; held && config.Status.JoinToken != nil {
			return config.Status.JoinToken.SHA256, nil
		}
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	config = &bootstrapv1.BootstrapConfig{}
	if err := reader.Get(ctx, key, config); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if _, held := config.Annotations[bootstrapv1.BootstrapDataDeliveredAnnotation]; !held {
		before := config.DeepCopy()
		if config.Annotations == nil {
			config.Annotations = map[string]string{}
		}
		config.Annotations[bootstrapv1.BootstrapDataDeliveredAnnotation] = s.claim.Name
		if err := r.Client.Patch(ctx, config, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return "", fmt.Errorf("marking BootstrapConfig %s as delivered: %w", ref.Name, err)
		}
	}
	if config.Status.JoinToken == nil {
		return "", nil
	}
	return config.Status.JoinToken.SHA256, nil
}
