package vmpool

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmpool"
)

// Reconciler keeps a VMPool's persistent MachineClaims: as many as spec.replicas, made from
// the current template, replacing outdated ones as spec.strategy says (the plan is pkg/vmpool's).
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Now tells the time (minReadySeconds, autoscaling); nil is time.Now. Tests pass a fake clock's.
	Now func() time.Time
}

// vmPoolScope is what one reconcile of a VMPool works with.
type vmPoolScope struct {
	pool *fleetv1.VMPool
	// hash of the current template spec.
	hash string
	// claims are the pool's MachineClaims (those it controls), by name.
	claims map[string]*infrav1.MachineClaim
	vms    []vmpool.VM
	// recheck asks for another look within this time (a VM becoming available, autoscaling).
	recheck time.Duration
	// listed: the claims were read, so the status can report them.
	listed bool
	// before is the pool's progress as its status last recorded it.
	before vmpool.Progress
	// deadlineIn, when set, is when the progress deadline falls for a pool still under way.
	deadlineIn time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmpools/status;vmpools/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile brings one VMPool's claims to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	pool := &fleetv1.VMPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &vmPoolScope{pool: pool, before: vmpool.Progress{Hash: pool.Status.TemplateHash,
		Updated: int(pool.Status.UpdatedReplicas), Available: int(pool.Status.AvailableReplicas), Existing: len(pool.Status.VMs)}}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, pool, fleetv1.VMPoolFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	// The pool pauses with its HypervisorCluster's Cluster, as its standalone claims do: clusterctl
	// move pauses Clusters only.
	cluster, err := r.poolCluster(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, pool); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(pool, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		r.updateStatus(s)
		if d := s.deadlineIn; d > 0 && reterr == nil && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d // to say when the progress deadline has passed
		}
		if err := helper.Patch(ctx, pool, patch.WithStatusObservedGeneration{}, patch.WithOwnedConditions{Conditions: []string{
			fleetv1.ReadyCondition, fleetv1.ProgressingCondition, clusterv1.PausedCondition,
		}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if !pool.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	for _, step := range []struct {
		name string
		fn   func(context.Context, *vmPoolScope) (ctrl.Result, error)
	}{
		{"selector", r.reconcileSelector},
		{"claims", r.reconcileClaims},
		{"autoscaling", r.reconcileAutoscaling},
		{"metadata", r.reconcileMetadata},
		{"rollout", r.reconcileRollout},
	} {
		// A step returns a result only to stop here (it waits for something).
		if res, err := step.fn(ctx, s); err != nil || !res.IsZero() {
			if err != nil {
				err = fmt.Errorf("%s: %w", step.name, err)
			}
			return res, err
		}
	}
	if s.recheck > 0 {
		return ctrl.Result{RequeueAfter: s.recheck}, nil
	}
	return ctrl.Result{}, nil
}

// poolCluster is the Cluster owning the HypervisorCluster the pool's template names, nil when
// there is none.
func (r *Reconciler) poolCluster(ctx context.Context, pool *fleetv1.VMPool) (*clusterv1.Cluster, error) {
	hc := &infrav1.HypervisorCluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.Template.Spec.HypervisorClusterName}, hc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, hc.ObjectMeta)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cluster, err
}

// reconcileSelector checks that the selector selects what the template stamps out, as a
// ReplicaSet's must; a pool whose claims its selector would not find creates none.
func (r *Reconciler) reconcileSelector(_ context.Context, s *vmPoolScope) (ctrl.Result, error) {
	p := s.pool
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
	if err == nil && sel.Empty() {
		err = fmt.Errorf("the selector is empty: it would select every claim of the namespace")
	}
	if err == nil && !sel.Matches(labels.Set(p.Spec.Template.ObjectMeta.Labels)) {
		err = fmt.Errorf("selector %q does not match template.metadata.labels %v", sel.String(), p.Spec.Template.ObjectMeta.Labels)
	}
	if err != nil {
		conditions.Set(p, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.VMPoolSelectorMismatchReason, Message: err.Error()})
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	p.Status.Selector = sel.String()
	if s.hash, err = vmpool.TemplateHash(&p.Spec.Template.Spec); err != nil {
		return ctrl.Result{}, err
	}
	if p.Status.TemplateHash != s.hash {
		// A new template starts a new rollout, whatever else this reconcile gets to.
		p.Status.LastProgressTime = &metav1.Time{Time: r.now()}
	}
	p.Status.TemplateHash = s.hash
	return ctrl.Result{}, nil
}

func (r *Reconciler) reconcileDelete(ctx context.Context, s *vmPoolScope) (ctrl.Result, error) {
	if _, err := r.reconcileClaims(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	left := 0
	for _, c := range s.claims {
		left++
		if c.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
	}
	if left > 0 {
		conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.VMPoolDeletingReason, Message: fmt.Sprintf("waiting for %d MachineClaim(s) and their VMs to be deleted", left)})
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(s.pool, fleetv1.VMPoolFinalizer)
	metrics.DeleteVMPool(s.pool.Namespace, s.pool.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller: it owns the pool's MachineClaims.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.VMPool{}).
		WithOptions(opts).
		Watches(&infrav1.MachineClaim{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &fleetv1.VMPool{}, handler.OnlyControllerOwner())).
		Complete(tracing.Reconciler("vmpool", r))
}
