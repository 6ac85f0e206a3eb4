package hvsim

import (
	"sort"
	"strings"
)

// The hosts' networks, DHCP servers, folders and volumes, for tests: snapshots to assert on and
// what an operator (or an attacker) could set up by hand.

// HyperVSwitchInfo is a snapshot of a virtual switch.
type HyperVSwitchInfo struct {
	Name, Type, Notes string
}

// HyperVNetIP is an address of one of a host's own adapters.
type HyperVNetIP struct {
	InterfaceAlias, IPAddress string
	PrefixLength              int
}

// HyperVDHCPScope is a snapshot of a DHCPv4 scope with its options and reservations.
type HyperVDHCPScope struct {
	ScopeID, SubnetMask, StartRange, EndRange, Name, Description string
	Router, DNSServer                                            string
	Reservations                                                 []HyperVDHCPReservation
}

// HyperVDHCPReservation is a DHCPv4 reservation.
type HyperVDHCPReservation struct {
	IPAddress, ClientID, Description string
}

// HyperVACL is an extended port ACL entry; empty fields are ANY.
type HyperVACL struct {
	Action, Direction, RemoteIPAddress, LocalPort, RemotePort, Protocol string
	Weight                                                              int
	Stateful                                                            bool
}

// aclSnapshot is nil for no ACLs.
func aclSnapshot(acls []hvACL) []HyperVACL {
	if len(acls) == 0 {
		return nil
	}
	out := make([]HyperVACL, 0, len(acls))
	for _, a := range acls {
		out = append(out, HyperVACL(a))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

// HostNetwork is a snapshot of a host's switches, adapter addresses, NetNats (name to internal
// prefix) and DHCP scopes.
type HostNetwork struct {
	Switches []HyperVSwitchInfo
	IPs      []HyperVNetIP
	NATs     map[string]string
	Scopes   []HyperVDHCPScope
}

// Network returns a snapshot of host's networking, sorted.
func (h *HyperV) Network(host string) HostNetwork {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := HostNetwork{NATs: map[string]string{}}
	hh := h.hosts[host]
	if hh == nil {
		return out
	}
	for _, sw := range hh.switches {
		out.Switches = append(out.Switches, HyperVSwitchInfo{Name: sw.name, Type: sw.switchType, Notes: sw.notes})
	}
	sort.Slice(out.Switches, func(i, j int) bool { return out.Switches[i].Name < out.Switches[j].Name })
	for _, a := range hh.net.ips {
		out.IPs = append(out.IPs, HyperVNetIP{InterfaceAlias: a.alias, IPAddress: a.ip, PrefixLength: a.prefixLength})
	}
	sort.Slice(out.IPs, func(i, j int) bool { return out.IPs[i].IPAddress < out.IPs[j].IPAddress })
	for n, p := range hh.net.nats {
		out.NATs[n] = p
	}
	for _, s := range hh.net.scopes {
		sc := HyperVDHCPScope{ScopeID: s.id, SubnetMask: s.mask, StartRange: s.start, EndRange: s.end, Name: s.name, Description: s.description,
			Router: s.router, DNSServer: s.dns}
		for _, r := range s.reservations {
			sc.Reservations = append(sc.Reservations, HyperVDHCPReservation{IPAddress: r.ip, ClientID: r.clientID, Description: r.description})
		}
		out.Scopes = append(out.Scopes, sc)
	}
	sort.Slice(out.Scopes, func(i, j int) bool { return out.Scopes[i].ScopeID < out.Scopes[j].ScopeID })
	return out
}

// SetDHCPServerRole installs or removes the DHCP Server role of a host; without it the role's
// cmdlets are not found. Hosts start with it.
func (h *HyperV) SetDHCPServerRole(host string, installed bool) error {
	return h.withHost(host, func(hh *hvHost) error { hh.net.dhcpRole = installed; return nil })
}

// AddSwitchWithNotes adds a virtual switch of switchType ("External", "Internal", "Private")
// with notes, as someone with Hyper-V Manager could.
func (h *HyperV) AddSwitchWithNotes(host, name, switchType, notes string) error {
	return h.withHost(host, func(hh *hvHost) error {
		hh.switches[name] = &hvSwitch{name: name, switchType: switchType, notes: notes}
		return nil
	})
}

// AddDHCPScope adds a DHCPv4 scope by hand.
func (h *HyperV) AddDHCPScope(host string, s HyperVDHCPScope) error {
	return h.withHost(host, func(hh *hvHost) error {
		hh.net.scopes = append(hh.net.scopes, &hvScope{id: s.ScopeID, mask: s.SubnetMask, start: s.StartRange, end: s.EndRange, name: s.Name,
			description: s.Description, router: s.Router, dns: s.DNSServer})
		return nil
	})
}

// AddDirectory makes a folder on a host, as an operator could.
func (h *HyperV) AddDirectory(host, path string) error {
	return h.withHost(host, func(hh *hvHost) error {
		if err := hh.newDirectory(path, true); err != nil {
			return err
		}
		return nil
	})
}

// Directory reports whether a folder exists on a host, and the names of the items right in it.
func (h *HyperV) Directory(host, path string) (bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil || !hh.isDir(path) {
		return false, nil
	}
	return true, hh.children(path)
}

// AddVolume mounts a volume of sizeGiB at mount (a drive's root or a folder such as
// C:\ClusterStorage\Volume1).
func (h *HyperV) AddVolume(host, mount string, sizeGiB int64) error {
	return h.withHost(host, func(hh *hvHost) error {
		hh.volumes[strings.TrimRight(key(mount), `\`)+`\`] = sizeGiB << 30
		return nil
	})
}
