package machineclaim

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// reconcileHardwareSupport refuses, before any VM is made, a claim asking for hardware its
// provider cannot give: silently dropping a disk would leave the guest without the storage it
// was declared with.
func (r *Reconciler) reconcileHardwareSupport(_ context.Context, s *claimScope) (ctrl.Result, error) {
	if s.provider == nil || s.claim.Status.VMID != "" {
		return ctrl.Result{}, nil
	}
	if missing := missingHardware(s.claim, s.provider.Capabilities()); len(missing) > 0 {
		s.terminal = true
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.UnsupportedHardwareReason,
			fmt.Sprintf("HypervisorCluster %s cannot give this claim %s: remove them or use a cluster whose provider has them",
				s.hc.Name, strings.Join(missing, ", ")))
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	if checker, ok := hypervisor.As[hypervisor.HardwareChecker](s.provider); ok {
		if err := checker.CheckHardware(claimHardware(s)); err != nil {
			s.terminal = true
			setVMCondition(s.claim, metav1.ConditionFalse, infrav1.UnsupportedHardwareReason,
				fmt.Sprintf("HypervisorCluster %s cannot give this claim its hardware: %v", s.hc.Name, err))
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
	}
	return ctrl.Result{}, nil
}

// claimHardware is the claim's extra disks, NICs and PCI devices as a provider sees them, for
// HardwareChecker.
func claimHardware(s *claimScope) hypervisor.ConfigSpec {
	c := s.claim
	spec := hypervisor.ConfigSpec{ExtraDisks: extraDisks(c)}
	for _, n := range c.Spec.NICs {
		spec.NICs = append(spec.NICs, claimNIC(s, n))
	}
	if p := c.Spec.Proxmox; p != nil {
		for _, d := range p.PCIDevices {
			spec.PCIDevices = append(spec.PCIDevices, hypervisor.PCIDevice{Mapping: d.Mapping, PCIe: d.PCIe, PrimaryGPU: d.PrimaryGPU})
		}
	}
	return spec
}

// missingHardware names the claim's hardware settings the provider lacks the capability for.
func missingHardware(c *infrav1.MachineClaim, caps hypervisor.Capabilities) []string {
	var missing []string
	if len(c.Spec.Disks) > 0 && !caps.ExtraDisks {
		missing = append(missing, "extra disks (spec.disks)")
	}
	if len(c.Spec.NICs) > 0 && !caps.NICs {
		missing = append(missing, "network interfaces (spec.nics)")
	}
	if c.Spec.Storage != nil && !caps.Storages {
		missing = append(missing, "disks on a VMStorage (spec.storage)")
	}
	return missing
}

// extraDisks is the claim's spec.disks for the provider.
func extraDisks(c *infrav1.MachineClaim) []hypervisor.ExtraDisk {
	var out []hypervisor.ExtraDisk
	for _, d := range c.Spec.Disks {
		storage := d.Storage
		if storage == "" && c.Status.Storage != nil {
			storage = c.Status.Storage.StorageName // spec.storage places the disks that name none
		}
		out = append(out, hypervisor.ExtraDisk{Name: d.Name, SizeGiB: int(d.SizeGiB), Storage: storage, Bus: string(d.Bus)})
	}
	return out
}

// claimNetwork is the claim's NICs for the provider, each with a MAC derived from the claim ID
// and the NIC's name, and the network-config that gives the guest their names and addresses.
func claimNetwork(s *claimScope) ([]hypervisor.NIC, string, error) {
	c := s.claim
	nics := make([]hypervisor.NIC, 0, len(c.Spec.NICs))
	ifaces := make([]cloudinit.Interface, 0, len(c.Spec.NICs))
	for _, n := range c.Spec.NICs {
		nic := claimNIC(s, n)
		nics = append(nics, nic)
		in := cloudinit.Interface{Name: n.Name, MAC: nic.MAC, MTU: nic.MTU}
		for _, a := range []*infrav1.StaticAddress{n.IPv4, n.IPv6} {
			if a == nil {
				continue
			}
			in.Addresses = append(in.Addresses, a.Address)
			if a.Gateway != "" {
				in.Gateways = append(in.Gateways, a.Gateway)
			}
		}
		for _, fam := range nicPools(n) {
			a, ok := s.poolAddresses[ipamKey(n.Name, fam.v6)]
			if !ok {
				return nil, "", fmt.Errorf("NIC %s has no address from %s %s yet", n.Name, fam.pool.Kind, fam.pool.Name)
			}
			in.Addresses = append(in.Addresses, a.prefix.String())
			if a.gateway != "" {
				in.Gateways = append(in.Gateways, a.gateway)
			}
		}
		ifaces = append(ifaces, in)
	}
	var dns cloudinit.DNS
	if d := c.Spec.DNS; d != nil {
		dns = cloudinit.DNS{Nameservers: d.Nameservers, SearchDomains: d.SearchDomains}
	} else {
		dns.Nameservers = networkNameservers(s)
	}
	config, err := cloudinit.NetworkConfig(ifaces, dns)
	if err != nil {
		return nil, "", fmt.Errorf("rendering the network-config: %w", err)
	}
	return nics, config, nil
}

// claimNIC is one of the claim's NICs as the provider sees it: on a VMNetwork, with the
// network's bridge, VLAN, MTU and policy.
func claimNIC(s *claimScope, n infrav1.NIC) hypervisor.NIC {
	nic := hypervisor.NIC{Name: n.Name, Bridge: n.Bridge, VLAN: int(ptr.Deref(n.VLAN, 0)), Model: n.Model,
		MAC: nicMAC(s.claim.Spec.ClaimID, n.Name), Firewall: n.Firewall, MTU: int(ptr.Deref(n.MTU, 0))}
	if a, ok := s.networks[n.Name]; ok {
		nic = networkNIC(nic, a)
	}
	return nic
}

// nicPool is an IPAM pool a NIC takes an address of one family from.
type nicPool struct {
	pool *infrav1.IPPoolReference
	v6   bool
	// namespace of a VMNetwork pool of another namespace; empty otherwise.
	namespace string
}

// nicPools are the IPAM pools of a NIC: its pool references, or its VMNetwork for IPv4.
func nicPools(n infrav1.NIC) []nicPool {
	var out []nicPool
	if n.Network != nil {
		out = append(out, nicPool{pool: networkPool(n.Network), namespace: n.Network.Namespace})
	} else if n.IPv4PoolRef != nil {
		out = append(out, nicPool{pool: n.IPv4PoolRef})
	}
	if n.IPv6PoolRef != nil {
		out = append(out, nicPool{pool: n.IPv6PoolRef, v6: true})
	}
	return out
}

// nicMAC derives a locally administered unicast MAC from the claim ID and the NIC's name: known
// before the VM exists (the network-config names it), the same on every retry, and different for
// every claim, since claim IDs are random.
func nicMAC(claimID, nic string) string {
	sum := sha256.Sum256([]byte(claimID + "/" + nic))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", sum[0], sum[1], sum[2], sum[3], sum[4])
}
