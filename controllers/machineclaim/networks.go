package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmnetwork"
)

// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmnetworks;vmstorages,verbs=get;list;watch

// networkRetry is how soon a claim waiting for a network or storage looks again.
const networkRetry = 15 * time.Second

// attachedNetwork is a NIC's VMNetwork as the claim's hypervisor holds it.
type attachedNetwork struct {
	network *fleetv1.VMNetwork
	// realization is the network on the claim's hypervisor; via names the HypervisorCluster of
	// the network's namespace that defined it.
	realization fleetv1.VMNetworkRealization
	via         string
}

// networkPool is the IPAM pool of a NIC on a VMNetwork: the network itself.
func networkPool(ref *infrav1.VMNetworkReference) *infrav1.IPPoolReference {
	return &infrav1.IPPoolReference{APIGroup: fleetv1.GroupVersion.Group, Kind: "VMNetwork", Name: ref.Name}
}

// networkNamespace is the namespace of the VMNetwork a NIC names.
func networkNamespace(c *infrav1.MachineClaim, ref *infrav1.VMNetworkReference) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return c.Namespace
}

// reconcileNetworks finds, for every NIC on a VMNetwork, the network as the claim's hypervisor
// holds it. A network of another namespace is used only when it lists the claim's namespace: a
// namespace's users must not put VMs on networks nobody shared with them.
func (r *Reconciler) reconcileNetworks(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if step := c.Status.CompletedStep; step != "" && step != infrav1.StepCloned {
		return ctrl.Result{}, nil // the NICs are configured already
	}
	for _, nic := range c.Spec.NICs {
		if nic.Network == nil {
			continue
		}
		ns := networkNamespace(c, nic.Network)
		n := &fleetv1.VMNetwork{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: nic.Network.Name}, n); err != nil {
			if apierrors.IsNotFound(err) {
				setVMCondition(c, metav1.ConditionFalse, infrav1.NetworkNotFoundReason,
					fmt.Sprintf("NIC %s names VMNetwork %s/%s, which does not exist", nic.Name, ns, nic.Network.Name))
				return ctrl.Result{RequeueAfter: networkRetry}, nil
			}
			return ctrl.Result{}, err
		}
		if !vmnetwork.Allowed(n, c.Namespace) {
			setVMCondition(c, metav1.ConditionFalse, infrav1.NetworkNotAllowedReason,
				fmt.Sprintf("NIC %s names VMNetwork %s/%s, which is not shared with namespace %s (its spec.allowedNamespaces)", nic.Name, ns, n.Name, c.Namespace))
			return ctrl.Result{RequeueAfter: networkRetry}, nil
		}
		rz, via, err := vmnetwork.RealizationFor(n, s.hc)
		if err != nil {
			setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForNetworkReason, fmt.Sprintf("NIC %s: %v", nic.Name, err))
			return ctrl.Result{RequeueAfter: networkRetry}, nil
		}
		if s.networks == nil {
			s.networks = map[string]attachedNetwork{}
		}
		s.networks[nic.Name] = attachedNetwork{network: n, realization: rz, via: via}
	}
	return ctrl.Result{}, nil
}

// networkNIC is a NIC on a VMNetwork as the provider sees it.
func networkNIC(nic hypervisor.NIC, a attachedNetwork) hypervisor.NIC {
	nic.Bridge = a.realization.Bridge
	nic.VLAN = int(ptr.Deref(a.realization.VLAN, 0))
	nic.MTU = int(ptr.Deref(a.network.Spec.MTU, 0))
	nic.Policy = vmnetwork.NICPolicy(a.network, a.realization)
	nic.Firewall = nic.Policy != nil && nic.Policy.SecurityGroup != ""
	return nic
}

// reserveAddresses records each NIC's address in the hypervisor's own IPAM, where it has one,
// so its DHCP server gives the guest the address cloud-init sets.
func (r *Reconciler) reserveAddresses(ctx context.Context, s *claimScope) error {
	c := s.claim
	for _, nic := range c.Spec.NICs {
		a, ok := s.networks[nic.Name]
		if !ok {
			continue
		}
		addr, ok := s.poolAddresses[ipamKey(nic.Name, false)]
		if !ok {
			continue
		}
		nw, owner, err := r.networker(ctx, s, a)
		if err != nil || nw == nil {
			return err
		}
		if err := nw.ReserveAddress(ctx, a.network.Status.NetworkID, owner, addr.prefix.Addr(), nicMAC(c.Spec.ClaimID, nic.Name)); err != nil {
			return fmt.Errorf("reserving %s for NIC %s on VMNetwork %s/%s: %w", addr.prefix.Addr(), nic.Name, a.network.Namespace, a.network.Name, err)
		}
	}
	return nil
}

// releaseNetworkAddresses undoes reserveAddresses once the VM is gone: a reservation left in a
// DHCP scope would refuse the address to the next VM it is allocated to. Proxmox drops a
// destroyed VM's IPAM entries itself; the release is then a no-op. A network or cluster that is
// gone has nothing left to release.
func (r *Reconciler) releaseNetworkAddresses(ctx context.Context, s *claimScope) error {
	c := s.claim
	if s.hc == nil {
		return nil
	}
	for _, nic := range c.Spec.NICs {
		if nic.Network == nil {
			continue
		}
		ip := &ipamv1.IPAddress{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ipAddressClaimName(c.Name, nic.Name, false)}, ip); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		addr, err := netip.ParseAddr(ip.Spec.Address)
		if err != nil {
			continue
		}
		n := &fleetv1.VMNetwork{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: networkNamespace(c, nic.Network), Name: nic.Network.Name}, n); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		rz, via, err := vmnetwork.RealizationFor(n, s.hc)
		if err != nil || n.Status.NetworkID == "" {
			continue //nolint:nilerr // not defined on this hypervisor: nothing was reserved there
		}
		nw, owner, err := r.networker(ctx, s, attachedNetwork{network: n, realization: rz, via: via})
		if err != nil || nw == nil {
			return err
		}
		err = nw.ReleaseAddress(ctx, n.Status.NetworkID, owner, addr, nicMAC(c.Spec.ClaimID, nic.Name))
		if err != nil && !errors.Is(err, hypervisor.ErrNotFound) && !errors.Is(err, hypervisor.ErrNotOwned) {
			return fmt.Errorf("releasing %s of NIC %s on VMNetwork %s/%s: %w", addr, nic.Name, n.Namespace, n.Name, err)
		}
	}
	return nil
}

// networker is the Networker of the HypervisorCluster that defined a's network, with the
// ownership its objects carry: the claim's own when the network is in its namespace, otherwise
// the one of the network's namespace on the same hypervisor. Nil when the provider has none.
func (r *Reconciler) networker(ctx context.Context, s *claimScope, a attachedNetwork) (hypervisor.Networker, hypervisor.Ownership, error) {
	p := s.provider
	hc := s.hc
	if a.network.Namespace != s.hc.Namespace || a.via != s.hc.Name || p == nil {
		hc = &infrav1.HypervisorCluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: a.network.Namespace, Name: a.via}, hc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, hypervisor.Ownership{}, nil
			}
			return nil, hypervisor.Ownership{}, fmt.Errorf("HypervisorCluster %s/%s of VMNetwork %s: %w", a.network.Namespace, a.via, a.network.Name, err)
		}
		var err error
		if p, err = r.Registry.Get(ctx, hc); err != nil {
			return nil, hypervisor.Ownership{}, err
		}
	}
	nw, _ := hypervisor.As[hypervisor.Networker](p)
	return nw, hypervisor.Ownership{Cluster: hc.Namespace + "/" + hc.Name}, nil
}

// networkNameservers are the resolvers the claim's networks announce, for a claim that names
// none itself.
func networkNameservers(s *claimScope) []string {
	var out []string
	for _, nic := range s.claim.Spec.NICs {
		a, ok := s.networks[nic.Name]
		if !ok {
			continue
		}
		if rng, ok, _ := vmnetwork.IPAMRange(a.network); ok && rng.DNSServer.IsValid() {
			if dns := rng.DNSServer.String(); !slices.Contains(out, dns) {
				out = append(out, dns)
			}
		}
	}
	return out
}
