package vmnetwork

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ID is the short identifier a network's hypervisor objects are named from: "n" and six
// characters of the hash of the VMNetwork's UID, so it fits Proxmox's eight-character SDN IDs
// with a one-letter prefix, and a network deleted and made again gets new objects.
func ID(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "n" + lowerBase32.EncodeToString(sum[:])[:6]
}

// Key is "<namespace>.<name>" of a network, the value of hfv1.VMNetworkNameLabel.
func Key(namespace, name string) string { return namespace + "." + name }

// Allowed reports whether VMs of namespace may attach to the network.
func Allowed(n *hfv1.VMNetwork, namespace string) bool {
	return n.Namespace == namespace || slices.Contains(n.Spec.AllowedNamespaces, namespace)
}

// RealizationFor finds the network's realisation a VM of HypervisorCluster hc attaches through:
// the one on hc itself when the network is in hc's namespace, otherwise one on a HypervisorCluster
// of the network's namespace that points at the same hypervisor endpoint. It returns why not when
// there is none ready.
func RealizationFor(n *hfv1.VMNetwork, hc *infrav1.HypervisorCluster) (hfv1.VMNetworkRealization, string, error) {
	for _, r := range n.Status.Realizations {
		same := n.Namespace == hc.Namespace && r.Cluster == hc.Name
		shared := n.Namespace != hc.Namespace && r.Endpoint != "" && r.Endpoint == hc.Spec.Endpoint
		if !same && !shared {
			continue
		}
		if !r.Ready {
			return r, r.Cluster, fmt.Errorf("VMNetwork %s/%s is not ready on HypervisorCluster %s: %s: %s", n.Namespace, n.Name, r.Cluster, r.Reason, r.Message)
		}
		return r, r.Cluster, nil
	}
	if n.Namespace == hc.Namespace {
		return hfv1.VMNetworkRealization{}, "", fmt.Errorf("VMNetwork %s/%s is not defined on HypervisorCluster %s: add it to the network's spec.clusters", n.Namespace, n.Name, hc.Name)
	}
	return hfv1.VMNetworkRealization{}, "", fmt.Errorf("VMNetwork %s/%s is defined on no HypervisorCluster of namespace %s with endpoint %s", n.Namespace, n.Name, n.Namespace, hc.Spec.Endpoint)
}

// Virtual is the network as a provider defines it on one HypervisorCluster. It refuses a spec
// that CEL cannot check: a DHCP range whose start is after its end, or that holds the gateway.
func Virtual(n *hfv1.VMNetwork, id string, owner hypervisor.Ownership) (hypervisor.VirtualNetwork, error) {
	v := hypervisor.VirtualNetwork{
		ID: id, Title: n.Namespace + "/" + n.Name, Owner: owner, Uplink: n.Spec.Uplink,
		VLAN: int(ptr.Deref(n.Spec.VLAN, 0)), VNI: int(ptr.Deref(n.Spec.VNI, 0)), MTU: int(ptr.Deref(n.Spec.MTU, 0)),
	}
	switch n.Spec.Type {
	case hfv1.VLANNetwork:
		v.Kind = hypervisor.NetworkVLAN
	case hfv1.VXLANNetwork:
		v.Kind = hypervisor.NetworkVXLAN
	default:
		v.Kind = hypervisor.NetworkIsolated
	}
	for _, p := range n.Spec.Peers {
		a, err := netip.ParseAddr(p)
		if err != nil {
			return v, fmt.Errorf("peer %q: %w", p, err)
		}
		v.Peers = append(v.Peers, a)
	}
	for i, s := range n.Spec.Subnets {
		sub, err := subnet(s)
		if err != nil {
			return v, fmt.Errorf("spec.subnets[%d]: %w", i, err)
		}
		v.Subnets = append(v.Subnets, sub)
	}
	v.Rules = Rules(n)
	return v, nil
}

func subnet(s hfv1.VMNetworkSubnet) (hypervisor.Subnet, error) {
	var out hypervisor.Subnet
	var err error
	if out.CIDR, err = netip.ParsePrefix(s.CIDR); err != nil {
		return out, err
	}
	out.SNAT = s.SNAT
	if s.Gateway != "" {
		if out.Gateway, err = netip.ParseAddr(s.Gateway); err != nil {
			return out, err
		}
	}
	if d := s.DHCP; d != nil {
		if out.DHCPStart, err = netip.ParseAddr(d.RangeStart); err != nil {
			return out, err
		}
		if out.DHCPEnd, err = netip.ParseAddr(d.RangeEnd); err != nil {
			return out, err
		}
		if out.DHCPEnd.Less(out.DHCPStart) {
			return out, fmt.Errorf("the DHCP range starts at %s, after its end %s", out.DHCPStart, out.DHCPEnd)
		}
		if out.Gateway.IsValid() && !out.Gateway.Less(out.DHCPStart) && !out.DHCPEnd.Less(out.Gateway) {
			return out, fmt.Errorf("the gateway %s is inside the DHCP range %s-%s", out.Gateway, out.DHCPStart, out.DHCPEnd)
		}
		if d.DNSServer != "" {
			if out.DNSServer, err = netip.ParseAddr(d.DNSServer); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// Rules is the network's security policy in the hypervisor seam's words.
func Rules(n *hfv1.VMNetwork) []hypervisor.FirewallRule {
	if n.Spec.SecurityPolicy == nil {
		return nil
	}
	out := make([]hypervisor.FirewallRule, 0, len(n.Spec.SecurityPolicy.Rules))
	for _, r := range n.Spec.SecurityPolicy.Rules {
		fr := hypervisor.FirewallRule{Direction: "in", Action: "ACCEPT", Peer: r.Peer, Comment: r.Comment,
			Ports: strings.ReplaceAll(r.Ports, "-", ":")}
		if r.Direction == "Egress" {
			fr.Direction = "out"
		}
		switch r.Action {
		case "Deny":
			fr.Action = "DROP"
		case "Reject":
			fr.Action = "REJECT"
		}
		if r.Protocol != "" && r.Protocol != "Any" {
			fr.Protocol = strings.ToLower(string(r.Protocol))
		}
		out = append(out, fr)
	}
	return out
}

// NICPolicy is what a NIC on the network gets besides its bridge, through realisation r.
func NICPolicy(n *hfv1.VMNetwork, r hfv1.VMNetworkRealization) *hypervisor.NICPolicy {
	p := &hypervisor.NICPolicy{SecurityGroup: r.SecurityGroup}
	if r.SecurityGroup == "" {
		p.Rules = Rules(n)
	}
	if n.Spec.QoS != nil {
		p.RateMbps = int(n.Spec.QoS.BandwidthMbps)
	}
	if p.SecurityGroup == "" && len(p.Rules) == 0 && p.RateMbps == 0 {
		return nil
	}
	return p
}
