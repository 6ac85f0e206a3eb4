package fleetcontrolplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// tokenLifetime of the kubeconfig token; it is renewed once two thirds have passed.
const tokenLifetime = 24 * time.Hour

// Reconciler gives Cluster API what a runner fleet's Cluster needs to settle:
// an initialized control plane and a <cluster>-kubeconfig Secret. The kubeconfig points at the
// management cluster with a short-lived token of a ServiceAccount that may only read Nodes, so Cluster
// API's node lookups find nothing and MachineHealthCheck can judge runners by their conditions.
type Reconciler struct {
	Client      client.Client
	WatchFilter string
	// Server and CAData describe the API server written into kubeconfigs: always the manager's own.
	Server string
	CAData []byte
	// ServiceAccount is the installation's workload-reader, the only ServiceAccount whose tokens
	// the manager mints. Its RBAC (a Role in the installation's namespace with this one resource
	// name) allows no other.
	ServiceAccount types.NamespacedName
}

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=fleetcontrolplanes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=fleetcontrolplanes/status,verbs=get;update;patch

// Token requests for the workload reader are allowed by a Role in the installation's namespace
// (config/rbac/workload_reader.yaml), not by a marker: a marker would grant them cluster-wide.

// Reconcile keeps one FleetControlPlane's kubeconfig Secret current.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cp := &controlplanev1.FleetControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, cp.ObjectMeta)
	if err != nil || cluster == nil {
		ctrl.LoggerFrom(ctx).Info("waiting for Cluster API to set the owner Cluster")
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, cp); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}
	if !cp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the kubeconfig Secret is owned by cp and goes with it
	}
	helper, err := patch.NewHelper(cp, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		cp.Status.ObservedGeneration = cp.Generation
		if err := helper.Patch(ctx, cp, patch.WithOwnedConditions{Conditions: []string{controlplanev1.AvailableCondition, clusterv1.PausedCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if exp := cp.Status.TokenExpirationTime; exp != nil && time.Until(exp.Time) > tokenLifetime/3 {
		return ctrl.Result{RequeueAfter: time.Until(exp.Time) - tokenLifetime/3}, nil
	}
	sa := r.ServiceAccount
	token, expires, err := r.requestToken(ctx, sa)
	if err != nil {
		reason := controlplanev1.TokenRequestFailedReason
		if apierrors.IsNotFound(err) {
			reason = controlplanev1.ServiceAccountMissingReason
		}
		conditions.Set(cp, metav1.Condition{Type: controlplanev1.AvailableCondition, Status: metav1.ConditionFalse, Reason: reason,
			Message: fmt.Sprintf("token for ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)})
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if err := tenancy.Check(r.writeKubeconfig(ctx, cp, cluster, token), cp.Namespace); err != nil {
		if errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			conditions.Set(cp, metav1.Condition{Type: controlplanev1.AvailableCondition, Status: metav1.ConditionFalse,
				Reason: controlplanev1.NamespaceNotEnabledReason, Message: err.Error()})
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
		return ctrl.Result{}, err
	}
	cp.Status.TokenExpirationTime = &metav1.Time{Time: expires}
	cp.Status.Initialization = &controlplanev1.FleetControlPlaneInitializationStatus{ControlPlaneInitialized: ptr.To(true)}
	conditions.Set(cp, metav1.Condition{Type: controlplanev1.AvailableCondition, Status: metav1.ConditionTrue,
		Reason: controlplanev1.KubeconfigReadyReason, Message: fmt.Sprintf("Secret %s-kubeconfig valid until %s", cluster.Name, expires.UTC().Format(time.RFC3339))})
	return ctrl.Result{RequeueAfter: time.Until(expires) - tokenLifetime/3}, nil
}

// requestToken asks for a token of the ServiceAccount directly (the TokenRequest answers NotFound
// for a missing one), so the manager needs no read access to ServiceAccounts.
func (r *Reconciler) requestToken(ctx context.Context, ref types.NamespacedName) (string, time.Time, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime.Seconds()))}}
	if err := r.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, err
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// writeKubeconfig writes <cluster>-kubeconfig in the form Cluster API reads (type
// cluster.x-k8s.io/secret, key value, cluster-name label), owned by cp so clusterctl move and
// garbage collection follow it.
func (r *Reconciler) writeKubeconfig(ctx context.Context, cp *controlplanev1.FleetControlPlane, cluster *clusterv1.Cluster, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster.Name] = &clientcmdapi.Cluster{Server: r.Server, CertificateAuthorityData: r.CAData}
	cfg.AuthInfos["reader"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[cluster.Name] = &clientcmdapi.Context{Cluster: cluster.Name, AuthInfo: "reader"}
	cfg.CurrentContext = cluster.Name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster.Name + "-kubeconfig", Namespace: cp.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cp, controlplanev1.GroupVersion.WithKind("FleetControlPlane"))},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": data},
	}
	return r.Client.Patch(ctx, secret, client.Apply, client.FieldOwner("fleetcontrolplane-controller"), client.ForceOwnership)
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&controlplanev1.FleetControlPlane{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilter)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToControlPlane)).
		Complete(tracing.Reconciler("fleetcontrolplane", r))
}

func (r *Reconciler) clusterToControlPlane(_ context.Context, o client.Object) []ctrl.Request {
	c, ok := o.(*clusterv1.Cluster)
	if !ok || c.Spec.ControlPlaneRef.Kind != "FleetControlPlane" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}}
}
