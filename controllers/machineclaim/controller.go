package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmstorage"
)

// Reconciler provisions one VM per MachineClaim: clone, configure, attach cloud-init,
// start, report addresses; and on deletion stops and destroys it before releasing the claim.
type Reconciler struct {
	Client client.Client
	// APIReader reads the claim itself past the cache. Each reconcile must see the task and VMID the
	// previous one wrote; a stale cache would start a second clone or forget a reservation.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// History hears of VM lifecycle moments for job records and the audit log; nil keeps none.
	History     History
	Registry    *connection.Registry
	WatchFilter string
	// PollInterval is how often an in-flight hypervisor task is polled. Default 2s.
	PollInterval time.Duration
	// TaskDeadline is how long a deleting claim waits for one hypervisor task before it looks at
	// the VM again and acts anew. Default DefaultTaskDeadline.
	TaskDeadline time.Duration

	// Clusters is each HypervisorCluster's runtime: its capacity queue (clones and deletes within
	// spec.limits, the line of claims waiting for room), node listing, template and PCI resolutions.
	Clusters *clusterruntime.Runtimes
	// CapacityRecheck is how long a claim waiting for capacity waits for a wake-up before it
	// looks for room by itself. Default DefaultCapacityRecheck.
	CapacityRecheck time.Duration

	// placements rate-limits persistent claims that wait for a host to fit them.
	placements placementGate
	// polls paces each claim's reads of its task and its guest agent.
	polls pollPacer
}

// DefaultTaskDeadline bounds a stop or destroy task: Proxmox ends them within minutes even for
// large disks, so one still running after this is taken as hung.
const DefaultTaskDeadline = 15 * time.Minute

// cluster is the runtime of the claim's HypervisorCluster; s.hc is known.
func (r *Reconciler) cluster(s *claimScope) *clusterruntime.Runtime { return r.Clusters.For(s.hc) }

func (r *Reconciler) taskDeadline() time.Duration {
	if r.TaskDeadline > 0 {
		return r.TaskDeadline
	}
	return DefaultTaskDeadline
}

// claimScope is what one reconcile of a MachineClaim works with.
type claimScope struct {
	claim *infrav1.MachineClaim
	// machine and cluster are nil for a standalone claim.
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	hc      *infrav1.HypervisorCluster
	// provider is set once the HypervisorCluster is known and reachable.
	provider hypervisor.Provider
	// bootstrapSecret names the bootstrap data Secret, nil when there is none.
	bootstrapSecret *string
	// bootstrapData is the user-data from the bootstrap Secret once loadBootstrapData read it.
	bootstrapData string
	// terminal is set when the last failure cannot heal by retrying unchanged.
	terminal bool
	// poolAddresses are the addresses IPAM pools allocated for the claim's NICs (ipamKey).
	poolAddresses map[string]poolAddress
	// networks are the claim's NICs' VMNetworks, by NIC name, once reconcileNetworks found them.
	networks map[string]attachedNetwork
	// storages are the VMStorages spec.storage may place the disks on, once reconcileStorage
	// found them (before the node is chosen).
	storages []vmstorage.Candidate
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaims,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaims/status;machineclaims/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch;delete

// Reconcile moves one MachineClaim's VM one step towards its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	claim := &infrav1.MachineClaim{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &claimScope{claim: claim}
	machine, err := util.GetOwnerMachine(ctx, r.Client, claim.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	switch {
	case machine != nil:
		s.machine = machine
		log = log.WithValues("Machine", klog.KObj(machine))
		if s.cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta); err != nil {
			log.Info("owner Machine has no Cluster yet")
			return ctrl.Result{}, nil
		}
		log = log.WithValues("Cluster", klog.KObj(s.cluster))
	case hasMachineOwnerRef(claim):
		log.Info("waiting for the owner Machine to appear in the cache")
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case claim.Spec.HypervisorClusterName == "" && claim.DeletionTimestamp.IsZero():
		// Neither Cluster API nor the user told us where the VM goes: say so, and wait.
		return ctrl.Result{}, r.patchWaiting(ctx, claim)
	}
	ctx = ctrl.LoggerInto(ctx, log)

	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, claim, infrav1.MachineClaimFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	pauseCluster := s.cluster
	if pauseCluster == nil {
		// A standalone claim pauses with its HypervisorCluster's Cluster: clusterctl move pauses
		// Clusters only, and a claim reconciled mid-move could act on a VM the target now owns.
		if pauseCluster, err = r.standaloneCluster(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, pauseCluster, claim); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(claim, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		r.summarize(s)
		r.settleSlots(s)
		if err := helper.Patch(ctx, claim, patch.WithOwnedConditions{Conditions: []string{
			infrav1.ReadyCondition, infrav1.MachineClaimVMProvisionedCondition, infrav1.MachineClaimBootstrapReadyCondition, infrav1.PausedCondition,
			infrav1.MachineClaimLiveMigratableCondition,
		}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if claim.Spec.ClaimID == "" {
		return r.reconcileClaimID(ctx, s)
	}
	if !claim.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// reconcileClaimID gives the claim its identity before anything is done to a VM for it: a random
// ID, kept in spec so that clusterctl move (which gives the claim a new UID and drops its status)
// keeps it. The deferred patch persists it; the claim's VM is only created on a later reconcile.
func (r *Reconciler) reconcileClaimID(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	id, err := claimvm.NewRandomID()
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("generating a claim ID: %w", err)
	}
	s.claim.Spec.ClaimID = id
	ctrl.LoggerFrom(ctx).Info("recorded the claim ID", "claimID", id)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// standaloneCluster is the Cluster owning a standalone claim's HypervisorCluster, nil when there is
// none (or no HypervisorCluster yet).
func (r *Reconciler) standaloneCluster(ctx context.Context, s *claimScope) (*clusterv1.Cluster, error) {
	if s.claim.Spec.HypervisorClusterName == "" && s.claim.Labels[infrav1.HypervisorClusterNameLabel] == "" {
		return nil, nil
	}
	hc, err := r.hypervisorCluster(ctx, s)
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

// reconcileNormal runs the provisioning steps in order; each returns early while it waits.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	for _, step := range []func(context.Context, *claimScope) (ctrl.Result, error){
		r.reconcileClusterInfrastructure,
		r.reconcileHypervisorCluster,
		r.reconcileNetworks,
		r.reconcileHardwareSupport,
		r.reconcileLostStatus,
		r.reconcileBootstrapData,
		r.reconcileIPAddresses,
		r.reconcileStorage,
		r.reconcileVM,
		r.reconcilePersistent,
		r.reconcileBootstrapped,
		r.reconcileSpentSeed,
		r.reconcileRunnerAddresses,
	} {
		if res, err := step(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// reconcileClusterInfrastructure waits, under Cluster API, for the Cluster's infrastructure.
func (r *Reconciler) reconcileClusterInfrastructure(_ context.Context, s *claimScope) (ctrl.Result, error) {
	if s.cluster == nil || s.claim.Status.VMID != "" {
		return ctrl.Result{}, nil
	}
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("waiting for Cluster %s infrastructure to be provisioned", s.cluster.Name))
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil // the Cluster watch normally brings us back sooner
	}
	return ctrl.Result{}, nil
}

// reconcileHypervisorCluster finds the HypervisorCluster and its provider. New VMs wait while it is
// unavailable; a VM already being provisioned continues once it comes back.
func (r *Reconciler) reconcileHypervisorCluster(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	hc, err := r.hypervisorCluster(ctx, s)
	if err != nil {
		if apierrors.IsNotFound(err) {
			setVMCondition(s.claim, metav1.ConditionFalse, infrav1.HypervisorClusterNotFoundReason, err.Error())
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	s.hc = hc
	if s.claim.Labels[infrav1.HypervisorClusterNameLabel] != hc.Name {
		if s.claim.Labels == nil {
			s.claim.Labels = map[string]string{}
		}
		s.claim.Labels[infrav1.HypervisorClusterNameLabel] = hc.Name
	}
	if msg := s.claim.Spec.ProviderMismatch(connection.ProviderOf(hc), hc.Name); msg != "" {
		// Settings the cluster's provider does not have would be silently dropped: refuse them.
		s.terminal = true
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.ProviderMismatchReason, msg)
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.HypervisorClusterUnavailableReason,
			fmt.Sprintf("HypervisorCluster %s is not available: %s", hc.Name, conditions.GetMessage(hc, infrav1.HypervisorClusterAvailableCondition)))
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	}
	if s.provider, err = r.Registry.Get(ctx, hc); err != nil {
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.HypervisorClusterUnavailableReason, err.Error())
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// hypervisorCluster resolves the claim's HypervisorCluster: under Cluster API the Cluster's
// infrastructureRef, otherwise spec.hypervisorClusterName (or the label a previous reconcile set).
func (r *Reconciler) hypervisorCluster(ctx context.Context, s *claimScope) (*infrav1.HypervisorCluster, error) {
	name := s.claim.Spec.HypervisorClusterName
	if s.cluster != nil && s.cluster.Spec.InfrastructureRef.IsDefined() {
		name = s.cluster.Spec.InfrastructureRef.Name
	}
	if name == "" {
		name = s.claim.Labels[infrav1.HypervisorClusterNameLabel]
	}
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: name}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(infrav1.GroupVersion.WithResource("hypervisorclusters").GroupResource(), name)
		}
		return nil, err
	}
	return hc, nil
}

// reconcileLostStatus finds the claim's VM again when its status is lost but its spec says it had
// one: clusterctl move copies spec (providerID and claimID) but not status. The VM named by the
// providerID must carry the claim's identity; then provisioning resumes where a running VM is.
func (r *Reconciler) reconcileLostStatus(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if c.Status.VMID != "" || c.Spec.ProviderID == "" {
		return ctrl.Result{}, nil
	}
	if id := vmIDOfProviderID(c.Spec.ProviderID); id != "" {
		vms, err := s.provider.OwnedVMs(ctx)
		if err != nil {
			return r.fail(ctx, s, fmt.Errorf("looking for VM %s of providerID %s: %w", id, c.Spec.ProviderID, err))
		}
		for _, vm := range vms {
			if vm.Ref.ID == id && claimvm.OwnedBy(vm, c) {
				c.Status.VMID, c.Status.Node = id, vm.Ref.Node
				c.Status.CompletedStep = infrav1.StepStarted
				r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.VMRecoveredEventReason, "found VM %s of providerID %s again", vm.Ref, c.Spec.ProviderID)
				return ctrl.Result{}, nil
			}
		}
	}
	// A claim whose VM is gone cannot get another one: the providerID cannot change.
	s.terminal = true
	setVMCondition(c, metav1.ConditionFalse, infrav1.VMNotFoundReason,
		fmt.Sprintf("providerID %s names no VM of this claim (claim ID %s); delete the claim", c.Spec.ProviderID, c.Spec.ClaimID))
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// reconcileBootstrapData waits, under Cluster API, until the bootstrap provider has named the
// bootstrap data Secret (Machine.spec.bootstrap.dataSecretName); a standalone claim names it in
// spec.bootstrap.dataSecretName. The Secret itself is read only when a VM is configured with it
// (loadBootstrapData): a claim waits for its clone's turn for minutes in a burst, and the join
// token in the data may be replaced until then.
func (r *Reconciler) reconcileBootstrapData(_ context.Context, s *claimScope) (ctrl.Result, error) {
	if step := s.claim.Status.CompletedStep; (step == infrav1.StepConfigured || step == infrav1.StepStarted) && !infrav1.WarmAwaitsData(s.claim) {
		return ctrl.Result{}, nil // already delivered
	}
	if infrav1.IsWarmHeld(s.claim.Annotations) {
		return ctrl.Result{}, nil // a warm VM is configured without it, and gets it when started
	}
	if s.machine != nil {
		s.bootstrapSecret = s.machine.Spec.Bootstrap.DataSecretName
		if s.bootstrapSecret == nil {
			setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
				"waiting for the bootstrap provider to set Machine.spec.bootstrap.dataSecretName")
			// A zero result would let reconcileNormal go on and start the VM without its
			// bootstrap data; the Machine watch normally brings us back much sooner.
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
	} else if s.claim.Spec.Bootstrap != nil {
		s.bootstrapSecret = s.claim.Spec.Bootstrap.DataSecretName
	}
	return ctrl.Result{}, nil
}

// loadBootstrapData reads the bootstrap data Secret reconcileBootstrapData named into
// s.bootstrapData, just before a VM is configured with it. A HyperFleet BootstrapConfig is
// marked first (holdJoinToken), so its join token is not replaced once a VM may hold it, and the
// data is taken only if the Secret carries the token the config recorded.
func (r *Reconciler) loadBootstrapData(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	name := s.bootstrapSecret
	if name == nil || s.bootstrapData != "" {
		return ctrl.Result{}, nil
	}
	tokenHash, err := r.holdJoinToken(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: *name}, secret); err != nil {
		if err := tenancy.Check(err, s.claim.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			setVMCondition(s.claim, metav1.ConditionFalse, infrav1.NamespaceNotEnabledReason, err.Error())
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
		if apierrors.IsNotFound(err) {
			setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
				fmt.Sprintf("bootstrap data Secret %s not found", *name))
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	if h := secret.Annotations[bootstrapv1.JoinTokenHashAnnotation]; h != "" && tokenHash != "" && h != tokenHash {
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
			fmt.Sprintf("the join token in bootstrap data Secret %s is being replaced", *name))
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	value, ok := secret.Data["value"]
	if !ok {
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
			fmt.Sprintf("bootstrap data Secret %s has no key value", *name))
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	s.bootstrapData = string(value)
	return ctrl.Result{}, nil
}

// summarize derives Ready and the phase from the detailed state.
func (r *Reconciler) summarize(s *claimScope) {
	c := s.claim
	switch {
	case !c.DeletionTimestamp.IsZero():
		c.Status.Phase = infrav1.MachineClaimPhaseDeleting
	case s.terminal:
		c.Status.Phase = infrav1.MachineClaimPhaseFailed
	case ptr.Deref(c.Status.Initialization, infrav1.MachineClaimInitializationStatus{}).Provisioned != nil &&
		*c.Status.Initialization.Provisioned && conditions.IsTrue(c, infrav1.MachineClaimVMProvisionedCondition):
		c.Status.Phase = infrav1.MachineClaimPhaseReady
	case c.Status.VMID != "" || c.Status.Task != nil:
		c.Status.Phase = infrav1.MachineClaimPhaseProvisioning
	default:
		c.Status.Phase = infrav1.MachineClaimPhasePending
	}
	// Ready is the VM's state until the VM runs; then, for a runner whose bootstrap HyperFleet
	// provides, it waits for the agent to prove its identity.
	if conditions.IsTrue(c, infrav1.MachineClaimVMProvisionedCondition) && conditions.Has(c, infrav1.MachineClaimBootstrapReadyCondition) &&
		c.DeletionTimestamp.IsZero() {
		condition.Mirror(c, infrav1.MachineClaimBootstrapReadyCondition, infrav1.ReadyCondition)
		if !conditions.IsTrue(c, infrav1.MachineClaimBootstrapReadyCondition) && c.Status.Phase == infrav1.MachineClaimPhaseReady {
			c.Status.Phase = infrav1.MachineClaimPhaseProvisioning
		}
	} else {
		condition.Mirror(c, infrav1.MachineClaimVMProvisionedCondition, infrav1.ReadyCondition)
	}
	summarizePersistent(c)
	c.Status.ObservedGeneration = c.Generation
}

func (r *Reconciler) patchWaiting(ctx context.Context, claim *infrav1.MachineClaim) error {
	helper, err := patch.NewHelper(claim, r.Client)
	if err != nil {
		return err
	}
	msg := "waiting for an owner Machine, or set spec.hypervisorClusterName to create the VM without Cluster API"
	setVMCondition(claim, metav1.ConditionFalse, infrav1.WaitingForOwnerMachineReason, msg)
	condition.Mirror(claim, infrav1.MachineClaimVMProvisionedCondition, infrav1.ReadyCondition)
	claim.Status.Phase = infrav1.MachineClaimPhasePending
	return helper.Patch(ctx, claim)
}

func setVMCondition(c *infrav1.MachineClaim, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(c, metav1.Condition{Type: infrav1.MachineClaimVMProvisionedCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

func hasMachineOwnerRef(o client.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "Machine" && (ref.APIVersion == clusterv1.GroupVersion.String() || hasGroup(ref.APIVersion, clusterv1.GroupVersion.Group)) {
			return true
		}
	}
	return false
}

func hasGroup(apiVersion, group string) bool {
	return len(apiVersion) > len(group) && apiVersion[:len(group)+1] == group+"/"
}

// SetupWithManager registers the controller: it watches MachineClaims, their Machines, Clusters and
// HypervisorClusters.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	clusterToClaims, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.MachineClaimList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MachineClaim{}).
		Owns(&ipamv1.IPAddressClaim{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilter)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("MachineClaim")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToClaims),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Watches(&infrav1.HypervisorCluster{}, handler.EnqueueRequestsFromMapFunc(r.hypervisorClusterToClaims),
			builder.WithPredicates(hypervisorClusterChangedForClaims())).
		Watches(&bootstrapv1.BootstrapConfig{}, handler.EnqueueRequestsFromMapFunc(r.bootstrapConfigToClaim)).
		Watches(&infrav1.MachineClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimsWaitingForHost), builder.WithPredicates(persistentPlacementChanged()))
	// A claim whose turn came in its cluster's queue is woken, not polled.
	b = b.WatchesRawSource(source.Channel(r.Clusters.ClaimWakeups(), &handler.TypedEnqueueRequestForObject[*infrav1.MachineClaim]{}))
	return b.Complete(tracing.Reconciler("machineclaim", r))
}

// hypervisorClusterChangedForClaims passes the HypervisorCluster changes its claims act on: its
// spec (nodes in maintenance, allowed nodes, VMID range), whether it is available, and its
// deletion. Every sweep writes status.lastSweepTime and status.ownedVMs; waking every waiting
// claim for that made each poll its task or guest agent again, once per sweep.
func hypervisorClusterChangedForClaims() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, okBefore := e.ObjectOld.(*infrav1.HypervisorCluster)
		after, okAfter := e.ObjectNew.(*infrav1.HypervisorCluster)
		if !okBefore || !okAfter {
			return true
		}
		return before.Generation != after.Generation ||
			before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero() ||
			conditions.IsTrue(before, infrav1.HypervisorClusterAvailableCondition) != conditions.IsTrue(after, infrav1.HypervisorClusterAvailableCondition)
	}}
}

// hypervisorClusterToClaims wakes the claims of a HypervisorCluster when it changes, e.g. becomes
// available again.
func (r *Reconciler) hypervisorClusterToClaims(ctx context.Context, o client.Object) []ctrl.Request {
	claims := &infrav1.MachineClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(claims.Items))
	for _, c := range claims.Items {
		// The label is set once the claim found its HypervisorCluster; a standalone claim created
		// before it names it in spec only.
		if c.Labels[infrav1.HypervisorClusterNameLabel] != o.GetName() && c.Spec.HypervisorClusterName != o.GetName() {
			continue
		}
		// Ready, Running and Stopped claims have nothing to gain; the sweep watches their VMs.
		if p := c.Status.Phase; p != infrav1.MachineClaimPhaseReady && p != infrav1.MachineClaimPhaseRunning && p != infrav1.MachineClaimPhaseStopped {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return reqs
}
