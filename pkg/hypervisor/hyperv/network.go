package hyperv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Networks on Hyper-V. Each host of the cluster gets the same network, since a Hyper-V switch
// belongs to one host (as a Proxmox simple zone's bridge does to each node):
//
//   - Isolated: an Internal virtual switch "hf-<ID>", marked by a ```hyperfleet-network block in
//     its Notes. The host's adapter on it, "vEthernet (hf-<ID>)", takes each subnet's gateway; a
//     subnet with SNAT gets a WinNAT NetNat named "hf-<ID>" for its prefix; a subnet with a DHCP
//     range gets a scope of the host's DHCP Server role, named "hf-<ID>" and described by the
//     network's mark, and reservations in it. A host without the DHCP Server role refuses such a
//     network with ErrUnsupported and the reason, before anything is made.
//   - VLAN: the existing switch Uplink carries the tag, which every NIC sets itself
//     (Set-VMNetworkAdapterVlan -Access): NetworkRealization{Bridge: Uplink, VLAN: tag}. Nothing
//     is made on the host, so nothing is owned; the uplink is only checked to exist.
//
// Rules become each NIC's extended port ACLs (network_acl.go); NetworkRealization.SecurityGroup
// stays empty.

// Module functions of networks.
const (
	fnSetNetwork     = "Set-HFVirtualNetwork"
	fnRemoveNetwork  = "Remove-HFVirtualNetwork"
	fnSetReservation = "Set-HFReservation"
	fnSetPortPolicy  = "Set-HFPortPolicy"
)

const (
	networkSwitchPrefix = "hf-"
	networkBlockStart   = "```hyperfleet-network"
)

// networkIDRe is a VirtualNetwork ID: it names the switch, the NetNat and the DHCP scopes.
var networkIDRe = regexp.MustCompile(`^[a-z][a-z0-9]{0,6}$`)

// resourceOwner is what the module checks in a switch's Notes or a storage folder's mark.
type resourceOwner struct {
	Installation string
	OwnerTag     string
	// Name is the network's ID or the storage's name.
	Name string
}

// ownerTagOf is the mark of the HypervisorCluster an Ownership names, this provider's when empty.
func (p *Provider) ownerTagOf(o hypervisor.Ownership) string {
	if o.Cluster == "" || o.Cluster == p.cfg.Cluster {
		return p.ownerTag
	}
	return OwnerTag(p.cfg.InstallationID, o.Cluster)
}

func (p *Provider) resourceOwner(o hypervisor.Ownership, name string) resourceOwner {
	return resourceOwner{Installation: p.cfg.InstallationID, OwnerTag: p.ownerTagOf(o), Name: name}
}

// resourceMark is the fenced block that marks a switch (in its Notes) or a storage folder (in its
// marker file) as this installation's: the fields the VMs' block carries, and the resource's name.
func resourceMark(start, text string, o resourceOwner) string {
	text = strings.TrimSpace(strings.ReplaceAll(text, blockEnd, "'''"))
	if len(text) > maxNotesText {
		text = text[:maxNotesText]
	}
	return fmt.Sprintf("%s\n\n%s\nmanaged-by: hyperfleet\ninstallation: %s\nowner-tag: %s\nname: %s\n%s",
		text, start, o.Installation, o.OwnerTag, o.Name, blockEnd)
}

// scopeDescription is the description that marks a DHCP scope, and its reservations, as the
// network's: a scope has no Notes, and a description is one line.
func scopeDescription(o resourceOwner) string {
	return fmt.Sprintf("HyperFleet network %s, installation %s, owner-tag %s", o.Name, o.Installation, o.OwnerTag)
}

// subnetInput is one subnet of Set-HFVirtualNetwork, with the forms the cmdlets take.
type subnetInput struct {
	Prefix         string
	NetworkAddress string
	PrefixLength   int
	SubnetMask     string
	Gateway        string `json:",omitempty"`
	DhcpStart      string `json:",omitempty"`
	DhcpEnd        string `json:",omitempty"`
	DnsServer      string `json:",omitempty"`
	Nat            bool   `json:",omitempty"`
}

// networkInput is the argument of Set-HFVirtualNetwork, Remove-HFVirtualNetwork and
// Set-HFReservation.
type networkInput struct {
	Kind             string `json:",omitempty"`
	SwitchName       string
	Owner            resourceOwner
	Notes            string        `json:",omitempty"`
	ScopeDescription string        `json:",omitempty"`
	Subnets          []subnetInput `json:",omitempty"`
	IPAddress        string        `json:",omitempty"`
	ClientID         string        `json:"ClientId,omitempty"`
	Remove           bool          `json:",omitempty"`
}

// maxSubnets bounds one network's subnets, so Set-HFVirtualNetwork's input fits a command line.
const maxSubnets = 4

// NetworkGaps lists what Hyper-V cannot give a network, from n alone.
func (p *Provider) NetworkGaps(n hypervisor.VirtualNetwork) []hypervisor.NetworkGap {
	var gaps []hypervisor.NetworkGap
	gap := func(field, format string, args ...any) {
		gaps = append(gaps, hypervisor.NetworkGap{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if !networkIDRe.MatchString(n.ID) {
		gap("status.id", "network ID %q is not 1 to 7 lower-case letters and digits starting with a letter (it names the Hyper-V switch hf-<ID>)", n.ID)
	}
	switch n.Kind {
	case hypervisor.NetworkIsolated:
		if n.Uplink != "" {
			gap("spec.uplink", "an isolated network is an internal switch of its own on Hyper-V; it has no uplink")
		}
	case hypervisor.NetworkVLAN:
		switch {
		case n.Uplink == "":
			gap("spec.uplink", "a VLAN network on Hyper-V needs the existing virtual switch that carries the VLAN (an external switch); Hyper-V has no default")
		case !switchNameRe.MatchString(n.Uplink):
			gap("spec.uplink", "%q cannot name a Hyper-V virtual switch", n.Uplink)
		}
		if n.VLAN < 1 || n.VLAN > 4094 {
			gap("spec.vlan", "VLAN %d is not between 1 and 4094", n.VLAN)
		}
	case hypervisor.NetworkVXLAN:
		gap("spec.type", "Hyper-V has no VXLAN without the SDN Network Controller, which HyperFleet does not drive")
	default:
		gap("spec.type", "network type %q is not Isolated or VLAN", n.Kind)
	}
	if n.MTU != 0 && n.MTU != 1500 {
		gap("spec.mtu", "a Hyper-V switch carries the frames its host adapters and guests take: jumbo frames are each host adapter's advanced property (*JumboPacket), which HyperFleet does not change; leave the MTU unset and set the guests' from their network-config")
	}
	if len(n.Subnets) > maxSubnets {
		gap("spec.subnets", "%d subnets: HyperFleet gives a Hyper-V network at most %d", len(n.Subnets), maxSubnets)
	}
	nat := 0
	for i, s := range n.Subnets {
		field := fmt.Sprintf("spec.subnets[%d]", i)
		switch {
		case !s.CIDR.IsValid() || !s.CIDR.Addr().Is4():
			gap(field+".cidr", "%s: HyperFleet's Hyper-V networks are IPv4 (the DHCP Server's v4 scopes and WinNAT)", s.CIDR)
			continue
		case s.CIDR.Bits() > 30:
			gap(field+".cidr", "%s leaves no room for a gateway and guests", s.CIDR)
		}
		dhcp := s.DHCPStart.IsValid() || s.DHCPEnd.IsValid()
		if n.Kind == hypervisor.NetworkVLAN {
			if dhcp {
				gap(field+".dhcp", "on a VLAN every host's DHCP Server would answer the same segment; use the VLAN's own DHCP server (HyperFleet's addresses still reach the guests through cloud-init)")
			}
			if s.SNAT {
				gap(field+".snat", "a VLAN network leaves through its own router; Hyper-V hosts do not masquerade it")
			}
			continue
		}
		if s.SNAT {
			nat++
		}
		if dhcp && !(s.CIDR.Contains(s.DHCPStart) && s.CIDR.Contains(s.DHCPEnd) && s.DHCPStart.Compare(s.DHCPEnd) <= 0) {
			gap(field+".dhcp", "DHCP range %s-%s is not an ordered range inside %s", s.DHCPStart, s.DHCPEnd, s.CIDR)
		}
		if s.SNAT && !s.Gateway.IsValid() {
			gap(field+".gateway", "SNAT needs the gateway the host takes on the network")
		}
		if s.Gateway.IsValid() && !s.CIDR.Contains(s.Gateway) {
			gap(field+".gateway", "gateway %s is not inside %s", s.Gateway, s.CIDR)
		}
		if s.DNSServer.IsValid() && !s.DNSServer.Is4() {
			gap(field+".dhcp.dnsServer", "%s: a DHCPv4 scope announces IPv4 resolvers", s.DNSServer)
		}
	}
	if nat > 1 {
		gap("spec.subnets", "SNAT on %d subnets: Windows NAT (WinNAT) masquerades one internal prefix per NetNat, and HyperFleet gives a network one", nat)
	}
	for i, r := range n.Rules {
		if _, err := aclEntries(r); err != nil {
			gap(fmt.Sprintf("spec.securityPolicy.rules[%d]", i), "%v", err)
		}
	}
	if _, err := portACLs(n.Rules); err != nil && len(gaps) == 0 {
		gap("spec.securityPolicy.rules", "%v", err)
	}
	return gaps
}

// networkGapsError is EnsureNetwork's refusal of a network with gaps.
func networkGapsError(op string, gaps []hypervisor.NetworkGap) error {
	reasons := make([]string, len(gaps))
	for i, g := range gaps {
		reasons[i] = g.Field + ": " + g.Reason
	}
	return hypervisor.Errorf(hypervisor.ErrUnsupported, op, "%s", strings.Join(reasons, "; "))
}

func switchOf(id string) string { return networkSwitchPrefix + id }

// networkOf is the module's input for the network with this ID and owner.
func (p *Provider) networkOf(id string, owner hypervisor.Ownership) networkInput {
	o := p.resourceOwner(owner, id)
	return networkInput{SwitchName: switchOf(id), Owner: o, ScopeDescription: scopeDescription(o)}
}

// EnsureNetwork makes every host match n; see the mapping at the top of this file.
func (p *Provider) EnsureNetwork(ctx context.Context, n hypervisor.VirtualNetwork) (hypervisor.NetworkRealization, error) {
	op := "ensure network " + n.ID
	if gaps := p.NetworkGaps(n); len(gaps) > 0 {
		return hypervisor.NetworkRealization{}, networkGapsError(op, gaps)
	}
	in := p.networkOf(n.ID, n.Owner)
	in.Kind = string(n.Kind)
	out := hypervisor.NetworkRealization{Bridge: in.SwitchName}
	if n.Kind == hypervisor.NetworkVLAN {
		in.SwitchName, in.ScopeDescription = n.Uplink, ""
		out = hypervisor.NetworkRealization{Bridge: n.Uplink, VLAN: n.VLAN}
	} else {
		title := n.Title
		if title == "" {
			title = n.ID
		}
		in.Notes = resourceMark(networkBlockStart, "HyperFleet network "+title+". HyperFleet deletes it when its VMNetwork goes away.", in.Owner)
		for _, s := range n.Subnets {
			in.Subnets = append(in.Subnets, subnetOf(s))
		}
	}
	_, errs := eachHost(p, "", func(h *host) (struct{}, error) {
		return struct{}{}, h.call(ctx, op, fnSetNetwork, in, nil)
	})
	if err := errors.Join(errs...); err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	return out, nil
}

func subnetOf(s hypervisor.Subnet) subnetInput {
	prefix := s.CIDR.Masked()
	mask := netip.AddrFrom4([4]byte(maskBytes(prefix.Bits())))
	in := subnetInput{Prefix: prefix.String(), NetworkAddress: prefix.Addr().String(), PrefixLength: prefix.Bits(), SubnetMask: mask.String(), Nat: s.SNAT}
	if s.Gateway.IsValid() {
		in.Gateway = s.Gateway.String()
	}
	if s.DHCPStart.IsValid() && s.DHCPEnd.IsValid() {
		in.DhcpStart, in.DhcpEnd = s.DHCPStart.String(), s.DHCPEnd.String()
		if s.DNSServer.IsValid() {
			in.DnsServer = s.DNSServer.String()
		}
	}
	return in
}

func maskBytes(bits int) []byte {
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// DeleteNetwork removes the network's NetNat, DHCP scopes, gateway addresses and switch from every
// host: only when the switch carries this installation's mark and the scopes its description.
// A switch VMs are still connected to is refused with ErrBusy.
func (p *Provider) DeleteNetwork(ctx context.Context, id string, owner hypervisor.Ownership) error {
	op := "delete network " + id
	if !networkIDRe.MatchString(id) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "network ID %q is not 1 to 7 lower-case letters and digits", id)
	}
	in := p.networkOf(id, owner)
	_, errs := eachHost(p, "", func(h *host) (struct{}, error) {
		return struct{}{}, h.call(ctx, op, fnRemoveNetwork, in, nil)
	})
	return errors.Join(errs...)
}

// ReserveAddress reserves ip for mac in the network's DHCP scope on every host (each host's
// isolated switch is a segment of its own, served by that host); a subnet without a DHCP range
// has no scope, and the address reaches the guest through cloud-init only.
func (p *Provider) ReserveAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	return p.reservation(ctx, "reserve "+ip.String()+" on network "+id, id, owner, ip, mac, false)
}

// ReleaseAddress removes the reservation ReserveAddress made.
func (p *Provider) ReleaseAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	return p.reservation(ctx, "release "+ip.String()+" on network "+id, id, owner, ip, mac, true)
}

func (p *Provider) reservation(ctx context.Context, op, id string, owner hypervisor.Ownership, ip netip.Addr, mac string, remove bool) error {
	if !networkIDRe.MatchString(id) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "network ID %q is not 1 to 7 lower-case letters and digits", id)
	}
	if !ip.Is4() {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%s is not an IPv4 address", ip)
	}
	if !macRe.MatchString(mac) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "MAC %q is not a unicast MAC address", mac)
	}
	in := p.networkOf(id, owner)
	in.IPAddress, in.ClientID, in.Remove = ip.String(), strings.ToLower(strings.ReplaceAll(mac, ":", "-")), remove
	_, errs := eachHost(p, "", func(h *host) (struct{}, error) {
		return struct{}{}, h.call(ctx, op, fnSetReservation, in, nil)
	})
	return errors.Join(errs...)
}

var _ hypervisor.Networker = (*Provider)(nil)
