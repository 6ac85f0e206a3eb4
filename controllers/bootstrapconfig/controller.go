package bootstrapconfig

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler renders each Machine's bootstrap data: cloud-init that starts the
// agent with a single-use join token, in a Secret that holds no platform credential.
type Reconciler struct {
	Client client.Client
	// APIReader reads a config past the cache just before its credential is minted, so a stale
	// copy never mints a second one (with SPIRE, a second token and registration entry on the
	// server). Client when nil.
	APIReader   client.Reader
	Recorder    record.EventRecorder
	WatchFilter string
	// Provisioner mints join tokens and knows the trust bundle, e.g. builtin.NewProvisioner. It
	// serves attestation provider Builtin, the default.
	Provisioner identity.Provisioner
	// SPIREProvisioner returns the provisioner for the SPIRE server at an address, e.g.
	// (*spire.Provisioners).For. It is only ever called with SPIREServerAddress. Nil refuses
	// provider SPIRE.
	SPIREProvisioner func(ctx context.Context, address string) (identity.Provisioner, error)
	// SPIREServerAddress is the admin API (unix:///path or host:port) of the one SPIRE server this
	// manager administers, from its settings. A config naming any other server is refused: a
	// BootstrapConfig must not make the manager dial a host or socket of its author's choosing.
	SPIREServerAddress string
	// SPIREAgentServerAddress is the host:port VMs' spire-agent dials when a config's
	// spireServerAddress is the server's local admin socket (unix:///path), which VMs cannot reach.
	SPIREAgentServerAddress string
	// ServiceURL is the bootstrap service address (https://) for configs that name none.
	ServiceURL string
	// SPIREServiceURL is the bootstrap service's SPIRE endpoint for configs with provider SPIRE
	// that name none: VMs attested by SPIRE trust only SPIRE's bundle, so they need the endpoint
	// presenting an SVID from SPIRE.
	SPIREServiceURL string
	// TrustDomain is the trust domain for configs that name none; identity.DefaultTrustDomain if empty.
	TrustDomain string

	// secrets spaces out the reads that check a handed-out data Secret is still in place.
	secrets secretChecks
}

// bootstrapScope is what one reconcile of a BootstrapConfig works with.
type bootstrapScope struct {
	config  *bootstrapv1.BootstrapConfig
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
}

// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigs/finalizers,verbs=update
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=bootstrapconfigtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=runnerpools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile renders one BootstrapConfig's data Secret once its Machine and Cluster are ready for it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	config := &bootstrapv1.BootstrapConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, config); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !config.DeletionTimestamp.IsZero() {
		// The owner Machine may be gone already: deletion needs only the config itself.
		return r.reconcileDelete(ctx, config)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, config.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if machine == nil {
		log.Info("waiting for Cluster API to set the owner Machine")
		return ctrl.Result{}, r.patchWaiting(ctx, config, bootstrapv1.WaitingForOwnerMachineReason,
			"waiting for the owner Machine")
	}
	log = log.WithValues("Machine", klog.KObj(machine))
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		log.Info("waiting for the Machine's Cluster", "reason", err.Error())
		return ctrl.Result{}, nil
	}
	log = log.WithValues("Cluster", klog.KObj(cluster))
	ctx = ctrl.LoggerInto(ctx, log)
	s := &bootstrapScope{config: config, machine: machine, cluster: cluster}

	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, config); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(config, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		condition.Mirror(config, bootstrapv1.DataSecretAvailableCondition, bootstrapv1.ReadyCondition)
		config.Status.ObservedGeneration = config.Generation
		if err := helper.Patch(ctx, config, patch.WithOwnedConditions{Conditions: []string{
			bootstrapv1.ReadyCondition, bootstrapv1.DataSecretAvailableCondition, bootstrapv1.PausedCondition,
		}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if isSPIRE(config) && controllerutil.AddFinalizer(config, bootstrapv1.SPIREFinalizer) {
		// Persisted by the deferred patch before any entry exists on the SPIRE server; the update
		// brings us back.
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

// reconcileNormal runs the steps in order; each returns early while it waits.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *bootstrapScope) (ctrl.Result, error) {
	for _, step := range []func(context.Context, *bootstrapScope) (ctrl.Result, error){
		r.reconcileClusterInfrastructure,
		r.reconcileWarmHold,
		r.reconcileDataSecret,
		r.reconcileAttestation,
	} {
		if res, err := step(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// reconcileClusterInfrastructure waits for the Cluster's infrastructure, as Cluster API's own
// bootstrap providers do: there is no point minting a token that expires before a VM can exist.
func (r *Reconciler) reconcileClusterInfrastructure(_ context.Context, s *bootstrapScope) (ctrl.Result, error) {
	if dataSecretCreated(s.config) {
		return ctrl.Result{}, nil
	}
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setDataSecretCondition(s.config, metav1.ConditionFalse, bootstrapv1.WaitingForClusterReason,
			"waiting for Cluster "+s.cluster.Name+" infrastructure to be provisioned")
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil // the Cluster watch normally brings us back sooner
	}
	return ctrl.Result{}, nil
}

// reconcileAttestation reports whether the VM has attested, and notices an unused token expiring.
// The bootstrap service sets Attested=True; this step only fills the gaps before that.
func (r *Reconciler) reconcileAttestation(ctx context.Context, s *bootstrapScope) (ctrl.Result, error) {
	c := s.config
	exp := c.Status.TokenExpirationTime
	if c.Status.AttestedTime != nil || exp == nil {
		return ctrl.Result{}, nil
	}
	if !isSPIRE(c) && (c.Status.JoinToken == nil || c.Status.JoinToken.RedeemedTime != nil) {
		return ctrl.Result{}, nil // the bootstrap service records redemption itself
	}
	if reason := conditions.GetReason(c, bootstrapv1.AttestedCondition); isSPIRE(c) &&
		(reason == bootstrapv1.TokenRedeemedReason || reason == bootstrapv1.TokenExpiredReason) {
		return ctrl.Result{}, nil // decided once, at expiry: SPIRE was asked already
	}
	remaining := time.Until(exp.Time)
	if margin := tokenRefreshMargin(c); !isSPIRE(c) && remaining < margin {
		// A runner queued behind a burst may not have its VM yet when its token runs out: while
		// no VM was given the bootstrap data, the token can be replaced without a VM left holding
		// the old one.
		undelivered, err := r.bootstrapDataUndelivered(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if undelivered {
			old := exp.Time
			res, err := r.mint(ctx, s)
			if err != nil || c.Status.TokenExpirationTime == nil || !c.Status.TokenExpirationTime.After(old) {
				return res, err
			}
			conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
				Reason: bootstrapv1.WaitingForAttestationReason, Message: "waiting for the VM to redeem its join token (replaced before its VM was configured)",
				ObservedGeneration: c.Generation})
			r.Recorder.Eventf(c, corev1.EventTypeNormal, bootstrapv1.JoinTokenRefreshedReason,
				"join token due to expire at %s replaced before any VM got it; the new one is valid until %s",
				old.UTC().Format(time.RFC3339), c.Status.TokenExpirationTime.UTC().Format(time.RFC3339))
			return ctrl.Result{RequeueAfter: time.Until(c.Status.TokenExpirationTime.Time) - margin}, nil
		}
	}
	if remaining > 0 {
		if conditions.Get(c, bootstrapv1.AttestedCondition) == nil {
			conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
				Reason: bootstrapv1.WaitingForAttestationReason, Message: "waiting for the VM to redeem its join token",
				ObservedGeneration: c.Generation})
		}
		next := remaining + time.Second
		if margin := tokenRefreshMargin(c); !isSPIRE(c) && remaining > margin {
			next = remaining - margin // look again when the token may need replacing
		}
		return ctrl.Result{RequeueAfter: next}, nil
	}
	if isSPIRE(c) {
		// SPIRE redeems the token itself: ask it whether the VM's spire-agent spent it in time.
		redeemed, err := r.spireRedeemed(ctx, c)
		if err != nil {
			return ctrl.Result{}, err
		}
		if redeemed {
			conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
				Reason: bootstrapv1.TokenRedeemedReason, Message: "the VM's spire-agent attested with the join token; waiting for the VM to fetch its runner config",
				ObservedGeneration: c.Generation})
			return ctrl.Result{}, nil
		}
	}
	if conditions.GetReason(c, bootstrapv1.AttestedCondition) != bootstrapv1.TokenExpiredReason {
		r.Recorder.Eventf(c, corev1.EventTypeWarning, bootstrapv1.TokenExpiredReason, "join token expired unused at %s", exp.UTC().Format(time.RFC3339))
	}
	conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
		Reason: bootstrapv1.TokenExpiredReason, Message: "the join token expired before the VM redeemed it",
		ObservedGeneration: c.Generation})
	return ctrl.Result{}, nil
}

// tokenRefreshMargin is how long before its expiry an undelivered join token is replaced: a third
// of its lifetime, at most five minutes (a VM configured just before needs that long to boot and
// redeem it).
func tokenRefreshMargin(c *bootstrapv1.BootstrapConfig) time.Duration {
	return min(5*time.Minute, joinTokenTTL(c)/3)
}

// bootstrapDataUndelivered tells whether no VM has been given the config's bootstrap data yet: the
// Machine's MachineClaim, read past the cache, has not configured its VM with it (a warm VM
// configured without it still waits for it). Another kind of infrastructure, or a claim that cannot
// be read, counts as delivered: the token is then left alone.
func (r *Reconciler) bootstrapDataUndelivered(ctx context.Context, s *bootstrapScope) (bool, error) {
	if _, held := s.config.Annotations[bootstrapv1.BootstrapDataDeliveredAnnotation]; held {
		return false, nil // a claim is giving it to a VM
	}
	ref := s.machine.Spec.InfrastructureRef
	if ref.Kind != "MachineClaim" || ref.APIGroup != infrav1.GroupVersion.Group || ref.Name == "" {
		return false, nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	claim := &infrav1.MachineClaim{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: s.machine.Namespace, Name: ref.Name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // no claim, no VM
		}
		return false, err
	}
	step := claim.Status.CompletedStep
	return (step != infrav1.StepConfigured && step != infrav1.StepStarted) || infrav1.WarmAwaitsData(claim), nil
}

func (r *Reconciler) patchWaiting(ctx context.Context, c *bootstrapv1.BootstrapConfig, reason, msg string) error {
	helper, err := patch.NewHelper(c, r.Client)
	if err != nil {
		return err
	}
	setDataSecretCondition(c, metav1.ConditionFalse, reason, msg)
	condition.Mirror(c, bootstrapv1.DataSecretAvailableCondition, bootstrapv1.ReadyCondition)
	return helper.Patch(ctx, c)
}

// SetupWithManager registers the controller: it watches BootstrapConfigs, their Machines and Clusters.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	clusterToConfigs, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &bootstrapv1.BootstrapConfigList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bootstrapv1.BootstrapConfig{}).
		Named("bootstrapconfig").
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilter)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(machineToBootstrapConfig)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToConfigs),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Complete(tracing.Reconciler("bootstrapconfig", r))
}

// machineToBootstrapConfig maps a Machine to the BootstrapConfig it references.
func machineToBootstrapConfig(_ context.Context, o client.Object) []ctrl.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	ref := m.Spec.Bootstrap.ConfigRef
	if ref.Kind != "BootstrapConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group || ref.Name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}}}
}
