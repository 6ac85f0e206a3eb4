package machineclaim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch

// poolAddress is an address an IPAM provider allocated for one NIC and address family.
type poolAddress struct {
	prefix  netip.Prefix
	gateway string
}

// ipamKey names one NIC's address family in claimScope.poolAddresses.
func ipamKey(nic string, v6 bool) string {
	if v6 {
		return nic + "/ipv6"
	}
	return nic + "/ipv4"
}

// reconcileIPAddresses claims an address for every NIC and family the claim takes from an IPAM
// pool, as Cluster API's IPAM contract has it: an IPAddressClaim per NIC and family, owned by the
// MachineClaim and named after it, which the pool's IPAM provider answers with an IPAddress. The
// VM is not made before every address is known; they reach the guest in its network-config.
// Only an IPAddress in the claim's namespace, made for that very IPAddressClaim and pool, is used.
func (r *Reconciler) reconcileIPAddresses(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if step := c.Status.CompletedStep; step != "" && step != infrav1.StepCloned {
		return ctrl.Result{}, nil // the addresses are in the VM's seed already
	}
	for _, nic := range c.Spec.NICs {
		for _, fam := range nicPools(nic) {
			addr, res, err := r.poolAddress(ctx, s, nic.Name, fam)
			if err != nil || !res.IsZero() {
				return res, err
			}
			if s.poolAddresses == nil {
				s.poolAddresses = map[string]poolAddress{}
			}
			s.poolAddresses[ipamKey(nic.Name, fam.v6)] = addr
		}
	}
	return ctrl.Result{}, nil
}

// poolAddress ensures one IPAddressClaim and reads the address allocated for it. A zero result
// with no error means the address is known.
func (r *Reconciler) poolAddress(ctx context.Context, s *claimScope, nic string, fam nicPool) (poolAddress, ctrl.Result, error) {
	c := s.claim
	pool, v6 := *fam.pool, fam.v6
	wait := func(reason, msg string) (poolAddress, ctrl.Result, error) {
		setVMCondition(c, metav1.ConditionFalse, reason, msg)
		// The IPAddressClaim watch brings us back when the IPAM provider answers.
		return poolAddress{}, ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	name := ipAddressClaimName(c.Name, nic, v6)
	poolRef := ipamv1.IPPoolReference{APIGroup: pool.APIGroup, Kind: pool.Kind, Name: pool.Name}
	ipClaim := &ipamv1.IPAddressClaim{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, ipClaim)
	switch {
	case apierrors.IsNotFound(err):
		ipClaim = &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: poolRef},
		}
		if fam.namespace != "" && fam.namespace != c.Namespace {
			ipClaim.Annotations = map[string]string{fleetv1.VMNetworkNamespaceAnnotation: fam.namespace}
		}
		if s.cluster != nil {
			ipClaim.Spec.ClusterName = s.cluster.Name
			ipClaim.Labels = map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name}
		}
		if err := controllerutil.SetControllerReference(c, ipClaim, r.Client.Scheme()); err != nil {
			return poolAddress{}, ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, ipClaim); err != nil && !apierrors.IsAlreadyExists(err) {
			return poolAddress{}, ctrl.Result{}, fmt.Errorf("creating IPAddressClaim %s: %w", name, err)
		}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.IPAddressClaimedEventReason, "claimed an address for NIC %s from %s %s (IPAddressClaim %s)", nic, pool.Kind, pool.Name, name)
		return wait(infrav1.WaitingForIPAddressReason, fmt.Sprintf("waiting for %s %s to allocate an address for NIC %s (IPAddressClaim %s)", pool.Kind, pool.Name, nic, name))
	case err != nil:
		return poolAddress{}, ctrl.Result{}, err
	}
	if !metav1.IsControlledBy(ipClaim, c) {
		// Someone else's claim of that name: its address was not allocated for this VM.
		return wait(infrav1.IPAddressClaimConflictReason, fmt.Sprintf("IPAddressClaim %s exists and is not this claim's; delete or rename it", name))
	}
	if want := fam.namespace; want != "" && want != c.Namespace && ipClaim.Annotations[fleetv1.VMNetworkNamespaceAnnotation] != want {
		return wait(infrav1.IPAddressClaimConflictReason, fmt.Sprintf("IPAddressClaim %s claims from another namespace's network than %s/%s", name, want, pool.Name))
	}
	if ipClaim.Spec.PoolRef != poolRef {
		return wait(infrav1.IPAddressClaimConflictReason, fmt.Sprintf("IPAddressClaim %s claims from %s %s, not %s %s", name,
			ipClaim.Spec.PoolRef.Kind, ipClaim.Spec.PoolRef.Name, pool.Kind, pool.Name))
	}
	if ipClaim.Status.AddressRef.Name == "" {
		msg := fmt.Sprintf("waiting for %s %s to allocate an address for NIC %s (IPAddressClaim %s)", pool.Kind, pool.Name, nic, name)
		if cond := meta.FindStatusCondition(ipClaim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition); cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" {
			msg += ": " + cond.Reason + ": " + cond.Message
		}
		return wait(infrav1.WaitingForIPAddressReason, msg)
	}
	ip := &ipamv1.IPAddress{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ipClaim.Status.AddressRef.Name}, ip); err != nil {
		if apierrors.IsNotFound(err) {
			return wait(infrav1.WaitingForIPAddressReason, fmt.Sprintf("IPAddressClaim %s names IPAddress %s, which does not exist in namespace %s",
				name, ipClaim.Status.AddressRef.Name, c.Namespace))
		}
		return poolAddress{}, ctrl.Result{}, err
	}
	addr, err := usableAddress(ip, name, poolRef, v6)
	if err != nil {
		return wait(infrav1.IPAddressInvalidReason, fmt.Sprintf("IPAddress %s for NIC %s cannot be used: %v", ip.Name, nic, err))
	}
	return addr, ctrl.Result{}, nil
}

// usableAddress checks that an IPAddress was made for the IPAddressClaim and pool, and holds an
// address of the family with a prefix length and, if any, a gateway of that family.
func usableAddress(ip *ipamv1.IPAddress, claimName string, pool ipamv1.IPPoolReference, v6 bool) (poolAddress, error) {
	if ip.Spec.ClaimRef.Name != claimName {
		return poolAddress{}, fmt.Errorf("it was made for IPAddressClaim %q, not %s", ip.Spec.ClaimRef.Name, claimName)
	}
	if ip.Spec.PoolRef != pool {
		return poolAddress{}, fmt.Errorf("it comes from %s %s, not %s %s", ip.Spec.PoolRef.Kind, ip.Spec.PoolRef.Name, pool.Kind, pool.Name)
	}
	a, err := netip.ParseAddr(ip.Spec.Address)
	if err != nil || a.Is4() == v6 || a.Zone() != "" {
		return poolAddress{}, fmt.Errorf("address %q is not an IPv%s address", ip.Spec.Address, map[bool]string{false: "4", true: "6"}[v6])
	}
	if ip.Spec.Prefix == nil || int(*ip.Spec.Prefix) < 1 || int(*ip.Spec.Prefix) > a.BitLen() {
		return poolAddress{}, fmt.Errorf("prefix length %v is not valid for %s", ip.Spec.Prefix, a)
	}
	out := poolAddress{prefix: netip.PrefixFrom(a, int(*ip.Spec.Prefix))}
	if gw := ip.Spec.Gateway; gw != "" {
		g, err := netip.ParseAddr(gw)
		if err != nil || g.Is4() != a.Is4() {
			return poolAddress{}, fmt.Errorf("gateway %q is not an address of the family of %s", gw, a)
		}
		out.gateway = g.String()
	}
	return out, nil
}

// ipAddressClaimName is the IPAddressClaim of one NIC and family: <claim>-<nic>-ipv4, the same on
// every reconcile, shortened with a hash when that would pass the 253 characters of a name.
func ipAddressClaimName(claim, nic string, v6 bool) string {
	fam := "ipv4"
	if v6 {
		fam = "ipv6"
	}
	name := fmt.Sprintf("%s-%s-%s", claim, nic, fam)
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// releaseIPAddresses deletes the claim's IPAddressClaims once its VM is gone, so the IPAM
// provider returns their addresses to the pool. Garbage collection would too, through the owner
// reference, but only after the claim itself is gone.
func (r *Reconciler) releaseIPAddresses(ctx context.Context, s *claimScope) error {
	c := s.claim
	for _, nic := range c.Spec.NICs {
		for _, fam := range nicPools(nic) {
			ipClaim := &ipamv1.IPAddressClaim{}
			key := client.ObjectKey{Namespace: c.Namespace, Name: ipAddressClaimName(c.Name, nic.Name, fam.v6)}
			if err := r.Client.Get(ctx, key, ipClaim); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return err
			}
			if !metav1.IsControlledBy(ipClaim, c) {
				continue // not ours to release
			}
			if err := r.Client.Delete(ctx, ipClaim); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("releasing IPAddressClaim %s: %w", key.Name, err)
			}
		}
	}
	return nil
}
