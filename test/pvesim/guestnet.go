package pvesim

import (
	"net/netip"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// guestNIC is an interface as the guest configured it from its network-config.
type guestNIC struct {
	name, mac string
	dhcp4     bool
	addrs     []netip.Prefix
}

// networkConfigV2 is the part of cloud-init's network-config version 2 the simulated guest applies.
type networkConfigV2 struct {
	Version   int `json:"version"`
	Ethernets map[string]struct {
		Match struct {
			MACAddress string `json:"macaddress"`
		} `json:"match"`
		SetName   string   `json:"set-name"`
		DHCP4     *bool    `json:"dhcp4"`
		Addresses []string `json:"addresses"`
	} `json:"ethernets"`
}

// configureGuestNetwork is cloud-init's network stage in the simulated guest: the interfaces of the
// seed's network-config (version 2) whose MAC matches one of the VM's NICs get their names and
// static addresses, and the guest agent reports them. A guest keeps the configuration it applied
// when its seed is later ejected, as a real one keeps its netplan files. Called with s.mu held.
func (s *Simulator) configureGuestNetwork(vm *vmState) {
	raw := s.bootVM(vm).NetworkConfig
	if len(raw) == 0 {
		return
	}
	var nc networkConfigV2
	if err := yaml.Unmarshal(raw, &nc); err != nil || nc.Version != 2 {
		s.log.Warn("guest ignores its network-config", "vmid", vm.vmid, "err", err)
		return
	}
	macs := map[string]bool{}
	for _, k := range sortedKeys(vm.conf) {
		if strings.HasPrefix(k, "net") && hotplugKeyRe.MatchString(k) {
			if mac := netMAC(vm.conf[k]); mac != "" {
				macs[mac] = true
			}
		}
	}
	var nics []guestNIC
	for id, e := range nc.Ethernets {
		mac := strings.ToLower(e.Match.MACAddress)
		if !macs[mac] {
			continue // no such NIC: the guest has nothing to configure
		}
		n := guestNIC{name: id, mac: mac, dhcp4: e.DHCP4 == nil || *e.DHCP4}
		if e.SetName != "" {
			n.name = e.SetName
		}
		for _, a := range e.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil {
				n.addrs = append(n.addrs, p)
			}
		}
		nics = append(nics, n)
	}
	sort.Slice(nics, func(i, j int) bool { return nics[i].name < nics[j].name })
	vm.guestNICs = nics
}

// netMAC is the MAC of a netN value ("virtio=BC:24:11:..,bridge=vmbr0"), lower case.
func netMAC(v string) string {
	for _, part := range strings.Split(v, ",") {
		if _, mac, ok := strings.Cut(part, "="); ok && macRe.MatchString(mac) {
			return strings.ToLower(mac)
		}
	}
	return ""
}

// guestInterfaces is guest-network-get-interfaces' answer for a guest that applied a
// network-config: each configured interface with its static addresses, the first one asking
// DHCP with the VM's simulated DHCP lease, and every one with its link-local IPv6 address.
func (s *Simulator) guestInterfaces(vm *vmState, stats map[string]any) []map[string]any {
	var out []map[string]any
	leased := false
	for _, n := range vm.guestNICs {
		addrs := []map[string]any{}
		if n.dhcp4 && !leased {
			leased = true
			addrs = append(addrs, map[string]any{"ip-address-type": "ipv4", "ip-address": vm.ip, "prefix": 16})
		}
		for _, p := range n.addrs {
			typ := "ipv4"
			if p.Addr().Is6() {
				typ = "ipv6"
			}
			addrs = append(addrs, map[string]any{"ip-address-type": typ, "ip-address": p.Addr().String(), "prefix": p.Bits()})
		}
		addrs = append(addrs, map[string]any{"ip-address-type": "ipv6", "ip-address": linkLocal(n.mac), "prefix": 64})
		out = append(out, map[string]any{"name": n.name, "hardware-address": n.mac, "ip-addresses": addrs, "statistics": stats})
	}
	return out
}
