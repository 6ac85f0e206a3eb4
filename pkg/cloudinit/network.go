package cloudinit

import (
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/yaml"
)

// Interface is one NIC as the guest's network-config describes it.
type Interface struct {
	// Name the guest gives the interface (set-name); cloud-init finds it by MAC.
	Name string
	MAC  string
	MTU  int
	// Addresses are static addresses with their prefix length ("192.0.2.10/24"). Without an IPv4
	// address the interface asks DHCP for one.
	Addresses []string
	// Gateways are default routes' next hops, at most one per address family.
	Gateways []string
}

// DNS is the guest's resolver configuration.
type DNS struct {
	Nameservers   []string
	SearchDomains []string
}

// NetworkConfig renders cloud-init's network-config version 2 (netplan's format) for the
// interfaces: each matched by MAC and renamed, static addresses with a default route per gateway,
// DHCPv4 where no IPv4 address is given. The resolver settings go on the first interface (netplan
// merges them for the whole system). Addresses and gateways are checked, so a malformed value is
// refused here rather than left for the guest to trip over.
func NetworkConfig(ifaces []Interface, dns DNS) (string, error) {
	type route struct {
		To  string `json:"to"`
		Via string `json:"via"`
	}
	type nameservers struct {
		Addresses []string `json:"addresses,omitempty"`
		Search    []string `json:"search,omitempty"`
	}
	type ethernet struct {
		Match       map[string]string `json:"match"`
		SetName     string            `json:"set-name"`
		DHCP4       bool              `json:"dhcp4"`
		Addresses   []string          `json:"addresses,omitempty"`
		Routes      []route           `json:"routes,omitempty"`
		MTU         int               `json:"mtu,omitempty"`
		Nameservers *nameservers      `json:"nameservers,omitempty"`
	}
	eths := map[string]ethernet{}
	for i, in := range ifaces {
		if in.Name == "" || strings.ContainsAny(in.Name, " :/") {
			return "", fmt.Errorf("interface %d: name %q is not an interface name", i, in.Name)
		}
		if _, dup := eths[in.Name]; dup {
			return "", fmt.Errorf("interface %s is named twice", in.Name)
		}
		e := ethernet{Match: map[string]string{"macaddress": strings.ToLower(in.MAC)}, SetName: in.Name, MTU: in.MTU, DHCP4: true}
		families := map[bool]bool{}
		for _, a := range in.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return "", fmt.Errorf("interface %s: address %q: %v", in.Name, a, err)
			}
			if p.Addr().Is4() {
				e.DHCP4 = false
			}
			families[p.Addr().Is4()] = true
			e.Addresses = append(e.Addresses, p.String())
		}
		for _, gw := range in.Gateways {
			ip, err := netip.ParseAddr(gw)
			if err != nil {
				return "", fmt.Errorf("interface %s: gateway %q: %v", in.Name, gw, err)
			}
			if !families[ip.Is4()] {
				return "", fmt.Errorf("interface %s: gateway %s has no address of its family on the interface", in.Name, gw)
			}
			to := "0.0.0.0/0"
			if !ip.Is4() {
				to = "::/0"
			}
			e.Routes = append(e.Routes, route{To: to, Via: ip.String()})
		}
		if i == 0 && (len(dns.Nameservers) > 0 || len(dns.SearchDomains) > 0) {
			for _, ns := range dns.Nameservers {
				if _, err := netip.ParseAddr(ns); err != nil {
					return "", fmt.Errorf("nameserver %q: %v", ns, err)
				}
			}
			e.Nameservers = &nameservers{Addresses: dns.Nameservers, Search: dns.SearchDomains}
		}
		eths[in.Name] = e
	}
	out, err := yaml.Marshal(map[string]any{"version": 2, "ethernets": eths})
	if err != nil {
		return "", err
	}
	return string(out), nil
}
