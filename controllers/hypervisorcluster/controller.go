package hypervisorcluster

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler connects to each HypervisorCluster's hypervisor, reports its health and
// failure domains to Cluster API, and sweeps stopped and orphaned VMs.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Registry *connection.Registry
	Sweeper  *Sweeper
	// Clusters is each HypervisorCluster's runtime: it receives each health check's node listing
	// (placement and drains use it) and the free memory the hosts report, so that claims waiting
	// for capacity start; it is forgotten with the HypervisorCluster.
	Clusters    *clusterruntime.Runtimes
	WatchFilter string
	// DefaultInterval is the health check and sweep interval when the object sets none.
	DefaultInterval time.Duration
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters/status;hypervisorclusters/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch;delete
// Secrets: read uncached, per namespace, through the ClusterRole hyperfleet-tenant-manager an admin
// binds in each namespace HyperFleet serves (config/tenant); no marker, which would grant it everywhere.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile checks one HypervisorCluster.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The owner Cluster is optional: a HypervisorCluster also serves standalone MachineClaims.
	cluster, err := util.GetOwnerCluster(ctx, r.Client, hc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, hc, infrav1.HypervisorClusterFinalizer); err != nil || added {
		// A finalizer does not change the generation, so its own update event is filtered out.
		return ctrl.Result{RequeueAfter: time.Millisecond}, err
	}
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, hc); err != nil || isPaused || requeue {
		if requeue && !isPaused {
			// The Paused condition was written; that status write wakes nothing by itself.
			return ctrl.Result{RequeueAfter: time.Millisecond}, err
		}
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(hc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		r.setReady(hc)
		if err := helper.Patch(ctx, hc, patch.WithOwnedConditions{Conditions: []string{
			infrav1.ReadyCondition, infrav1.HypervisorClusterAvailableCondition, infrav1.HypervisorClusterInsecureTransportCondition,
			infrav1.HypervisorClusterLongLivedVMPrivilegesCondition,
			infrav1.PausedCondition,
		}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if !hc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, hc)
	}
	return r.reconcileNormal(ctx, hc)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, hc *infrav1.HypervisorCluster) (ctrl.Result, error) {
	if hc.Spec.InstallationID == "" {
		return r.reconcileInstallationID(ctx, hc)
	}
	interval := r.DefaultInterval
	if hc.Spec.HealthCheckInterval != nil && hc.Spec.HealthCheckInterval.Duration > 0 {
		interval = hc.Spec.HealthCheckInterval.Duration
	}
	provider, err := r.reconcileConnection(ctx, hc)
	if err != nil {
		// Back off but keep checking: an unreachable API or a rotated Secret recovers by itself.
		return ctrl.Result{RequeueAfter: min(interval, 30*time.Second)}, nil
	}
	r.reconcileEndpoint(hc)
	if err := r.Sweeper.Sweep(ctx, hc, provider); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "sweep failed")
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// reconcileInstallationID gives the HypervisorCluster its installation identity: a random ID kept
// in spec, so that restarts, backups and clusterctl move carry it. Until the deferred patch has
// persisted it, no provider is built (connection.Registry refuses) and no VM is touched.
func (r *Reconciler) reconcileInstallationID(ctx context.Context, hc *infrav1.HypervisorCluster) (ctrl.Result, error) {
	id, err := claimvm.NewRandomID()
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("generating an installation ID: %w", err)
	}
	hc.Spec.InstallationID = id
	conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterAvailableCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.HypervisorClusterIdentityPendingReason, Message: "recording the installation ID " + id})
	ctrl.LoggerFrom(ctx).Info("recorded the installation ID", "installationID", id)
	r.Recorder.Eventf(hc, corev1.EventTypeNormal, infrav1.InstallationIDEventReason, "VMs of this HypervisorCluster are marked with installation ID %s", id)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// reconcileConnection owns the Available condition: credentials, reachability, privileges, nodes.
func (r *Reconciler) reconcileConnection(ctx context.Context, hc *infrav1.HypervisorCluster) (hypervisor.Provider, error) {
	unavailable := func(reason, msg string, err error) (hypervisor.Provider, error) {
		if prev := conditions.Get(hc, infrav1.HypervisorClusterAvailableCondition); prev == nil || prev.Reason != reason {
			r.Recorder.Event(hc, corev1.EventTypeWarning, reason, msg)
		}
		conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterAvailableCondition,
			Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		return nil, err
	}
	provider, err := r.Registry.Get(ctx, hc)
	if err != nil {
		return unavailable(connection.ReasonOf(err), err.Error(), err)
	}
	version, err := provider.Verify(ctx)
	if err != nil {
		return unavailable(connection.ReasonOf(err), fmt.Sprintf("%s: %v", hc.Spec.Endpoint, err), err)
	}
	reportFeaturePrivileges(hc, provider)
	listedAt := time.Now()
	nodes, err := provider.Nodes(ctx)
	if err != nil {
		return unavailable(connection.ReasonOf(err), fmt.Sprintf("listing nodes: %v", err), err)
	}
	rt := r.Clusters.For(hc)
	rt.PutNodes(provider, nodes, listedAt)
	hc.Status.FailureDomains = failureDomains(placement.AllowedNodes(nodes, hc.Spec.AllowedNodes))
	rt.ObserveFreeMemory(placement.AllowedNodes(nodes, hc.Spec.AllowedNodes))
	hc.Status.Nodes = int32(len(hc.Status.FailureDomains))
	hc.Status.Version = version
	if len(hc.Status.FailureDomains) == 0 {
		return unavailable(infrav1.HypervisorClusterNoNodesReason,
			fmt.Sprintf("none of the allowed nodes %v is online", hc.Spec.AllowedNodes), fmt.Errorf("no nodes"))
	}
	reason, msg := infrav1.HypervisorClusterAvailableReason, fmt.Sprintf("%s %s, %d node(s)", hc.Spec.Provider, version, hc.Status.Nodes)
	if insecure := r.reconcileTransport(ctx, hc); insecure != "" {
		reason, msg = infrav1.HypervisorClusterInsecureReason, msg+"; "+insecure
	}
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		r.Recorder.Event(hc, corev1.EventTypeNormal, reason, msg)
	}
	conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterAvailableCondition,
		Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if hc.Status.Initialization == nil {
		hc.Status.Initialization = &infrav1.HypervisorClusterInitializationStatus{}
	}
	hc.Status.Initialization.Provisioned = ptr.To(true)
	hc.Status.ObservedGeneration = hc.Generation
	return provider, nil
}

// reconcileTransport owns the InsecureTransport condition. Credentials sent over http:// or to an
// unverified server are exposed, so every connection that does so is reported loudly: a Warning
// Event and a log line each time, not only when the setting changes. It returns what is insecure,
// empty when nothing is.
func (r *Reconciler) reconcileTransport(ctx context.Context, hc *infrav1.HypervisorCluster) string {
	var reason, msg string
	switch {
	case strings.HasPrefix(strings.ToLower(hc.Spec.Endpoint), "http://"):
		reason, msg = infrav1.HypervisorClusterPlainHTTPReason,
			fmt.Sprintf("the API token goes to %s in clear text over plain HTTP (allowInsecureHTTP)", hc.Spec.Endpoint)
	case hc.Spec.InsecureSkipTLSVerify:
		reason, msg = infrav1.HypervisorClusterTLSUnverifiedReason, "TLS verification is disabled (insecureSkipTLSVerify)"
	default:
		conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterInsecureTransportCondition, Status: metav1.ConditionFalse,
			Reason: infrav1.HypervisorClusterSecureTransportReason, Message: "https:// with a verified certificate"})
		return ""
	}
	conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterInsecureTransportCondition, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg})
	r.Recorder.Event(hc, corev1.EventTypeWarning, infrav1.HypervisorClusterInsecureTransportCondition, msg)
	ctrl.LoggerFrom(ctx).Info("WARNING: insecure connection to the hypervisor API", "reason", reason, "detail", msg)
	return msg
}

// reconcileEndpoint fills controlPlaneEndpoint: Cluster API copies it to the Cluster, and a runner
// fleet has no control plane of its own, so the hypervisor API's address stands in.
func (r *Reconciler) reconcileEndpoint(hc *infrav1.HypervisorCluster) {
	if hc.Spec.ControlPlaneEndpoint.IsValid() {
		return
	}
	u, err := url.Parse(hc.Spec.Endpoint)
	if err != nil || u.Hostname() == "" {
		return
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		port = p
	}
	hc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(port)}
}

// reconcileDelete releases the HypervisorCluster once no MachineClaim uses it any more, so no VM is
// left without a way to delete it.
func (r *Reconciler) reconcileDelete(ctx context.Context, hc *infrav1.HypervisorCluster) (ctrl.Result, error) {
	if _, moving := hc.Annotations[clusterctlv1.DeleteForMoveAnnotation]; moving {
		// clusterctl move: the claims and their VMs live on in the target management cluster.
		r.Clusters.Forget(hc)
		controllerutil.RemoveFinalizer(hc, infrav1.HypervisorClusterFinalizer)
		return ctrl.Result{}, nil
	}
	claims := &infrav1.MachineClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(hc.Namespace),
		client.MatchingLabels{infrav1.HypervisorClusterNameLabel: hc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if n := len(claims.Items); n > 0 {
		conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterAvailableCondition, Status: metav1.ConditionFalse,
			Reason: infrav1.DeletingReason, Message: fmt.Sprintf("waiting for %d MachineClaim(s) to release their VMs", n)})
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	r.Clusters.Forget(hc)
	controllerutil.RemoveFinalizer(hc, infrav1.HypervisorClusterFinalizer)
	return ctrl.Result{}, nil
}

func (r *Reconciler) setReady(hc *infrav1.HypervisorCluster) {
	if !hc.DeletionTimestamp.IsZero() {
		conditions.Set(hc, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: infrav1.DeletingReason, Message: "HypervisorCluster is being deleted"})
		return
	}
	condition.Mirror(hc, infrav1.HypervisorClusterAvailableCondition, infrav1.ReadyCondition)
}

func failureDomains(nodes []hypervisor.Node) []clusterv1.FailureDomain {
	var fds []clusterv1.FailureDomain
	for _, n := range nodes {
		if !n.Online {
			continue
		}
		fds = append(fds, clusterv1.FailureDomain{Name: n.Name, ControlPlane: ptr.To(false),
			Attributes: map[string]string{"cpus": strconv.Itoa(n.CPUs)}})
	}
	return fds
}

// SetupWithManager registers the controller: it watches HypervisorClusters and Clusters. Secrets
// are not watched (that would need list and watch on every Secret of the cluster): a rotated
// credentials Secret is read on the next health check, at the latest one interval later.
//
// A HypervisorCluster wakes its controller only when its spec (generation), labels or annotations
// change, or it is deleted: the controller's own status writes (every sweep's lastSweepTime) would
// otherwise run a second health check and sweep right after each one, doubling the idle cost.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HypervisorCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilter)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("HypervisorCluster"), mgr.GetClient(), &infrav1.HypervisorCluster{})),
			builder.WithPredicates(predicates.ClusterUnpaused(mgr.GetScheme(), ctrl.LoggerFrom(ctx)))).
		Complete(tracing.Reconciler("hypervisorcluster", r))
}

// reportFeaturePrivileges sets LongLivedVMPrivileges from the provider's last Verify: a warning
// naming each privilege long-lived VMs' features lack, before someone's first snapshot fails.
// A provider that cannot tell leaves no condition.
func reportFeaturePrivileges(hc *infrav1.HypervisorCluster, provider hypervisor.Provider) {
	f, ok := hypervisor.As[hypervisor.FeaturePrivileges](provider)
	if !ok {
		return
	}
	missing, known := f.MissingFeaturePrivileges()
	switch {
	case !known:
		conditions.Delete(hc, infrav1.HypervisorClusterLongLivedVMPrivilegesCondition)
	case len(missing) == 0:
		conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterLongLivedVMPrivilegesCondition, Status: metav1.ConditionTrue,
			Reason: infrav1.HypervisorClusterPrivilegesPresentReason, Message: "the credentials carry the privileges of snapshots, hooks and migration"})
	default:
		conditions.Set(hc, metav1.Condition{Type: infrav1.HypervisorClusterLongLivedVMPrivilegesCondition, Status: metav1.ConditionFalse,
			Reason:  infrav1.HypervisorClusterPrivilegesMissingReason,
			Message: "runners are unaffected; these features will be refused (Forbidden): " + strings.Join(missing, "; ")})
	}
}
