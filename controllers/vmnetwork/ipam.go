package vmnetwork

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmnetwork"
)

// ReleaseAddressFinalizer keeps an IPAddressClaim on a VMNetwork until its IPAddress is gone.
const ReleaseAddressFinalizer = "ipam.hyperfleet.io/release-address"

// NotAllowedReason (IPAddressClaim Ready False): the network does not list the claim's namespace.
const NotAllowedReason = "NotAllowed"

// IPAMReconciler is the IPAM provider of VMNetworks: it answers an IPAddressClaim whose poolRef
// names a VMNetwork with an IPAddress from the network's range, as Cluster API's in-cluster IPAM
// provider answers claims on its pools. It runs one claim at a time and reads the addresses in
// use past the cache, so no address is handed out twice.
type IPAMReconciler struct {
	Client client.Client
	// APIReader lists the addresses in use past the cache.
	APIReader client.Reader
	Recorder  record.EventRecorder
}

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;delete

// Reconcile allocates or releases one IPAddressClaim's address.
func (r *IPAMReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isNetworkPool(claim.Spec.PoolRef) {
		return ctrl.Result{}, nil
	}
	if !claim.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, claim)
	}
	if !controllerutil.ContainsFinalizer(claim, ReleaseAddressFinalizer) {
		controllerutil.AddFinalizer(claim, ReleaseAddressFinalizer)
		return ctrl.Result{}, r.Client.Update(ctx, claim)
	}
	if claim.Status.AddressRef.Name != "" {
		return ctrl.Result{}, nil
	}
	addr, reason, msg, err := r.allocate(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := claim.DeepCopy()
	if addr == nil {
		meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition,
			Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: claim.Generation})
		return ctrl.Result{}, r.Client.Status().Patch(ctx, claim, client.MergeFrom(base))
	}
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: addr.Name}
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition,
		Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason, Message: "allocated " + addr.Spec.Address, ObservedGeneration: claim.Generation})
	return ctrl.Result{}, r.Client.Status().Patch(ctx, claim, client.MergeFrom(base))
}

// allocate finds the claim's IPAddress or makes one; without an address it says why.
func (r *IPAMReconciler) allocate(ctx context.Context, claim *ipamv1.IPAddressClaim) (*ipamv1.IPAddress, string, string, error) {
	netNS := claim.Annotations[fleetv1.VMNetworkNamespaceAnnotation]
	if netNS == "" {
		netNS = claim.Namespace
	}
	n := &fleetv1.VMNetwork{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: netNS, Name: claim.Spec.PoolRef.Name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("VMNetwork %s/%s does not exist", netNS, claim.Spec.PoolRef.Name), nil
		}
		return nil, "", "", err
	}
	if !vmnetwork.Allowed(n, claim.Namespace) {
		// Checked here and not only by the MachineClaim: anyone who may create an IPAddressClaim
		// in a namespace could otherwise take addresses of any network.
		return nil, NotAllowedReason, fmt.Sprintf("VMNetwork %s/%s does not list namespace %s in spec.allowedNamespaces", n.Namespace, n.Name, claim.Namespace), nil
	}
	if !n.DeletionTimestamp.IsZero() {
		return nil, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("VMNetwork %s/%s is being deleted", n.Namespace, n.Name), nil
	}
	rng, ok, err := vmnetwork.IPAMRange(n)
	if err != nil || !ok {
		return nil, ipamv1.IPAddressClaimReadyPoolNotReadyReason, fmt.Sprintf("VMNetwork %s/%s has no IPv4 subnet with a DHCP range to take addresses from", n.Namespace, n.Name), nil //nolint:nilerr // reported in the condition
	}
	key := vmnetwork.Key(n.Namespace, n.Name)
	existing := &ipamv1.IPAddress{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}, existing); {
	case err == nil:
		if existing.Spec.ClaimRef.Name == claim.Name && existing.Spec.PoolRef == claim.Spec.PoolRef && existing.Labels[fleetv1.VMNetworkNameLabel] == key {
			return existing, "", "", nil // made by an earlier reconcile that could not record it
		}
		return nil, ipamv1.IPAddressClaimReadyAllocationFailedReason, fmt.Sprintf("IPAddress %s exists and was not made for this claim", claim.Name), nil
	case !apierrors.IsNotFound(err):
		return nil, "", "", err
	}
	var inUse ipamv1.IPAddressList
	if err := r.APIReader.List(ctx, &inUse, client.MatchingLabels{fleetv1.VMNetworkNameLabel: key}); err != nil {
		return nil, "", "", err
	}
	used := map[netip.Addr]bool{}
	for _, a := range inUse.Items {
		if ip, err := netip.ParseAddr(a.Spec.Address); err == nil {
			used[ip] = true
		}
	}
	ip, ok := rng.NextFree(used)
	if !ok {
		return nil, ipamv1.IPAddressClaimReadyPoolExhaustedReason, fmt.Sprintf("VMNetwork %s/%s has no free address left in %s-%s", n.Namespace, n.Name, rng.Start, rng.End), nil
	}
	addr := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: claim.Namespace, Labels: map[string]string{fleetv1.VMNetworkNameLabel: key}},
		Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name}, PoolRef: claim.Spec.PoolRef,
			Address: ip.String(), Prefix: ptr.To(int32(rng.Prefix.Bits()))},
	}
	if rng.Gateway.IsValid() {
		addr.Spec.Gateway = rng.Gateway.String()
	}
	if err := controllerutil.SetControllerReference(claim, addr, r.Client.Scheme()); err != nil {
		return nil, "", "", err
	}
	if err := r.Client.Create(ctx, addr); err != nil {
		return nil, "", "", fmt.Errorf("creating IPAddress %s: %w", addr.Name, err)
	}
	r.Recorder.Eventf(claim, corev1.EventTypeNormal, fleetv1.AddressAllocatedEventReason, "allocated %s from VMNetwork %s/%s", ip, n.Namespace, n.Name)
	return addr, "", "", nil
}

// release deletes the claim's IPAddress and lets the claim go.
func (r *IPAMReconciler) release(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	if !controllerutil.ContainsFinalizer(claim, ReleaseAddressFinalizer) {
		return nil
	}
	addr := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}, addr)
	switch {
	case err == nil && metav1.IsControlledBy(addr, claim):
		if err := r.Client.Delete(ctx, addr); client.IgnoreNotFound(err) != nil {
			return err
		}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	controllerutil.RemoveFinalizer(claim, ReleaseAddressFinalizer)
	return r.Client.Update(ctx, claim)
}

func isNetworkPool(ref ipamv1.IPPoolReference) bool {
	return ref.APIGroup == fleetv1.GroupVersion.Group && ref.Kind == "VMNetwork"
}

// SetupWithManager registers the IPAM reconciler with one worker: allocations must not race.
func (r *IPAMReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	opts.MaxConcurrentReconciles = 1
	return ctrl.NewControllerManagedBy(mgr).
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			c, ok := o.(*ipamv1.IPAddressClaim)
			return ok && isNetworkPool(c.Spec.PoolRef)
		}))).
		WithOptions(opts).
		Named("vmnetwork-ipam").
		Complete(r)
}
