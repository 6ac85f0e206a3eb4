package proxmox

import (
	"fmt"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// NetworkGaps implements hypervisor.Networker: what PVE's SDN and firewall cannot give n. It
// makes no call.
func (p *Provider) NetworkGaps(n hypervisor.VirtualNetwork) []hypervisor.NetworkGap {
	var gaps []hypervisor.NetworkGap
	add := func(field, format string, args ...any) {
		gaps = append(gaps, hypervisor.NetworkGap{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch n.Kind {
	case hypervisor.NetworkIsolated:
	case hypervisor.NetworkVLAN:
		if n.VLAN < 1 || n.VLAN > 4094 {
			add("spec.vlan", "a PVE VLAN zone's VNet needs a VLAN tag from 1 to 4094")
		}
	case hypervisor.NetworkVXLAN:
		if len(n.Peers) == 0 {
			add("spec.peers", "a PVE VXLAN zone needs the peers' addresses: PVE has no multicast or learning VXLAN")
		}
		if n.VNI < 1 || n.VNI > 16777215 {
			add("spec.vni", "a PVE VXLAN zone's VNet needs a VNI from 1 to 16777215")
		}
	default:
		add("spec.type", "PVE SDN gives Isolated (simple zone), VLAN and VXLAN networks, not %q", n.Kind)
	}
	for i, s := range n.Subnets {
		field := fmt.Sprintf("spec.subnets[%d]", i)
		if !s.CIDR.IsValid() {
			add(field+".cidr", "not a CIDR")
			continue
		}
		if s.DHCPStart.IsValid() != s.DHCPEnd.IsValid() {
			add(field+".dhcp", "a DHCP range needs a start and an end")
		}
		if s.DHCPStart.IsValid() && n.Kind != hypervisor.NetworkIsolated {
			// PVE's DHCP (dnsmasq) serves Simple zones (and EVPN) only.
			add(field+".dhcp", "PVE's DHCP serves only Simple zones (Isolated networks); a %s network's DHCP must come from its uplink", n.Kind)
		}
		if s.DHCPStart.IsValid() && !s.Gateway.IsValid() {
			add(field+".gateway", "PVE's DHCP server for a subnet listens on the subnet's gateway address on the host: set a gateway")
		}
		if s.SNAT && n.Kind != hypervisor.NetworkIsolated {
			add(field+".snat", "PVE's SNAT needs the host to be the subnet's gateway, which only Simple (Isolated) zones make it")
		}
		if s.SNAT && !s.Gateway.IsValid() {
			add(field+".snat", "PVE's SNAT needs a gateway on the subnet")
		}
	}
	for i, r := range n.Rules {
		field := fmt.Sprintf("spec.securityPolicy.rules[%d]", i)
		if r.Ports != "" && r.Protocol != "tcp" && r.Protocol != "udp" {
			add(field+".ports", "PVE's firewall matches ports only with protocol tcp or udp")
		}
		if r.Direction != "in" && r.Direction != "out" {
			add(field+".direction", "PVE's firewall rules are in or out, not %q", r.Direction)
		}
	}
	return gaps
}
