package hvsim

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Networks (Set-HFVirtualNetwork, Remove-HFVirtualNetwork, Set-HFReservation) and port policies
// (Set-HFPortPolicy), as the module runs them with Get-VMSwitch, New-VMSwitch, Set-VMSwitch,
// Remove-VMSwitch, Get-VMNetworkAdapter -All, Get/New/Remove-NetIPAddress on the host's vEthernet
// adapter, Get/New/Remove-NetNat, the DHCP Server role's Get/Add/Set/Remove-DhcpServerv4Scope,
// Get/Set/Remove-DhcpServerv4OptionValue, Get/Add/Remove-DhcpServerv4Reservation,
// Get/Add/Remove-VMNetworkAdapterExtendedAcl and Set-VMNetworkAdapter -MaximumBandwidth. Each
// helper below stands for one cmdlet, with its refusals; the functions compose them in the
// module's order. A host may lack the DHCP Server role (SetDHCPServerRole): its cmdlets are then
// not found, which the module tells by Get-Command before it changes anything.

// hvSwitch is a virtual switch: "External", "Internal" or "Private", and its Notes.
type hvSwitch struct {
	name, switchType, notes string
}

// hvOwner is the mark the module checks on a switch or a storage folder.
type hvOwner struct{ Installation, OwnerTag, Name string }

type hvSubnetInput struct {
	Prefix, NetworkAddress string
	PrefixLength           int
	SubnetMask, Gateway    string
	DhcpStart, DhcpEnd     string
	DnsServer              string
	Nat                    bool
}

// hvACL is an extended port ACL entry (VMNetworkAdapterExtendedAclSetting); empty fields are ANY.
type hvACL struct {
	Action, Direction, RemoteIPAddress, LocalPort, RemotePort, Protocol string
	Weight                                                              int
	Stateful                                                            bool
}

type hvNetIP struct {
	alias, ip    string
	prefixLength int
}

type hvScope struct {
	id, mask, start, end, name, description string
	// router and dns are options 3 and 6, "" when not set.
	router, dns  string
	reservations []*hvReservation
}

type hvReservation struct{ ip, clientID, description string }

// hvHostNet is a host's own networking: the addresses of its vEthernet adapters, its WinNAT
// NetNats by name, and its DHCP Server (dhcpRole false: the role is not installed).
type hvHostNet struct {
	ips      []*hvNetIP
	nats     map[string]string
	dhcpRole bool
	scopes   []*hvScope
}

func newHostNet() hvHostNet { return hvHostNet{nats: map[string]string{}, dhcpRole: true} }

// marked is Test-HFMarked.
func marked(text, start string, o hvOwner) bool {
	kv := notesBlock(text, start)
	return kv["managed-by"] == "hyperfleet" && o.Installation != "" && kv["installation"] == o.Installation &&
		o.OwnerTag != "" && kv["owner-tag"] == o.OwnerTag && kv["name"] == o.Name
}

const networkBlock = "```hyperfleet-network"

func vEthernet(sw string) string { return "vEthernet (" + sw + ")" }

// ownedSwitch is Get-HFOwnedSwitch.
func (hh *hvHost) ownedSwitch(in hvInput) (*hvSwitch, *hvError) {
	sw := hh.switches[in.SwitchName]
	if sw == nil {
		return nil, nil
	}
	if !marked(sw.notes, networkBlock, in.Owner) {
		return nil, refuse("NotOwned", "virtual switch '%s' on %s does not carry this HyperFleet installation's mark for network %s in its Notes; it is left alone",
			in.SwitchName, strings.ToUpper(hh.name), in.Owner.Name)
	}
	return sw, nil
}

// networkScopes is Get-HFNetworkScopes.
func (hh *hvHost) networkScopes(in hvInput) ([]*hvScope, *hvError) {
	var out []*hvScope
	if !hh.net.dhcpRole {
		return nil, nil
	}
	for _, s := range hh.net.scopes {
		if s.name != in.SwitchName {
			continue
		}
		if s.description != in.ScopeDescription {
			return nil, refuse("NotOwned", "DHCP scope %s ('%s') on %s is not described as this installation's network %s; it is left alone",
				s.id, s.name, strings.ToUpper(hh.name), in.Owner.Name)
		}
		out = append(out, s)
	}
	return out, nil
}

func (hh *hvHost) scope(id string) *hvScope {
	for _, s := range hh.net.scopes {
		if s.id == id {
			return s
		}
	}
	return nil
}

// newNetIPAddress is New-NetIPAddress -InterfaceAlias: the adapter must exist (an internal
// switch's vEthernet adapter) and the address be new on the host.
func (hh *hvHost) newNetIPAddress(alias, ip string, prefixLength int) *hvError {
	found := false
	for _, sw := range hh.switches {
		if sw.switchType == "Internal" && vEthernet(sw.name) == alias {
			found = true
		}
	}
	if !found {
		return refuse("NotFound", "No matching MSFT_NetIPInterface objects found by CIM query for instances of the ROOT/StandardCimv2/MSFT_NetIPInterface class on the  CIM server: SELECT * FROM MSFT_NetIPInterface  WHERE ((InterfaceAlias LIKE '%s')). Verify query parameters and retry.", alias)
	}
	for _, a := range hh.net.ips {
		if a.ip == ip {
			return refuse("AlreadyExists", "Instance %s already exists", ip)
		}
	}
	hh.net.ips = append(hh.net.ips, &hvNetIP{alias: alias, ip: ip, prefixLength: prefixLength})
	return nil
}

func (hh *hvHost) removeNetIPAddresses(keep func(*hvNetIP) bool) {
	kept := hh.net.ips[:0]
	for _, a := range hh.net.ips {
		if keep(a) {
			kept = append(kept, a)
		}
	}
	hh.net.ips = kept
}

// newNetNat is New-NetNat: WinNAT refuses an internal prefix overlapping another NetNat's (the
// text is the simulator's).
func (hh *hvHost) newNetNat(name, prefix string) *hvError {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return refuse("Invalid", "The parameter is incorrect.")
	}
	for other, op := range hh.net.nats {
		if q, err := netip.ParsePrefix(op); err == nil && q.Overlaps(p) {
			return refuse("Invalid", "The parameter is incorrect. (NetNat %s already translates %s)", other, op)
		}
	}
	hh.net.nats[name] = prefix
	return nil
}

// setNetwork is Set-HFVirtualNetwork.
func (h *HyperV) setNetwork(hh *hvHost, in hvInput) (any, *hvError) {
	if in.Kind == "VLAN" {
		if hh.switches[in.SwitchName] == nil {
			return nil, refuse("NotFound", "virtual switch '%s', the uplink of network %s, does not exist on %s", in.SwitchName, in.Owner.Name, strings.ToUpper(hh.name))
		}
		return map[string]any{"Changed": false}, nil
	}
	for _, s := range in.Subnets {
		if s.DhcpStart != "" && !hh.net.dhcpRole {
			return nil, refuse("Unsupported", "the DHCP Server role is not installed on %s (the term 'Add-DhcpServerv4Scope' is not recognized): install it (Install-WindowsFeature DHCP -IncludeManagementTools) or give the network's subnets no DHCP range", strings.ToUpper(hh.name))
		}
	}
	sw, err := hh.ownedSwitch(in)
	if err != nil {
		return nil, err
	}
	scopes, err := hh.networkScopes(in)
	if err != nil {
		return nil, err
	}
	changed := false
	switch {
	case sw == nil:
		sw = &hvSwitch{name: in.SwitchName, switchType: "Internal", notes: in.Notes}
		hh.switches[in.SwitchName] = sw
		changed = true
	case sw.notes != in.Notes:
		sw.notes, changed = in.Notes, true
	}
	alias := vEthernet(in.SwitchName)
	want := map[string]bool{}
	for _, s := range in.Subnets {
		if s.Gateway != "" {
			want[s.Gateway+"/"+itoa(s.PrefixLength)] = true
		}
	}
	have := map[string]bool{}
	hh.removeNetIPAddresses(func(a *hvNetIP) bool {
		if a.alias != alias {
			return true
		}
		k := a.ip + "/" + itoa(a.prefixLength)
		if !want[k] {
			changed = true
			return false
		}
		have[k] = true
		return true
	})
	for _, s := range in.Subnets {
		if s.Gateway != "" && !have[s.Gateway+"/"+itoa(s.PrefixLength)] {
			if err := hh.newNetIPAddress(alias, s.Gateway, s.PrefixLength); err != nil {
				return nil, err
			}
			changed = true
		}
	}
	natPrefix := ""
	for _, s := range in.Subnets {
		if s.Nat && natPrefix == "" {
			natPrefix = s.Prefix
		}
	}
	if cur, ok := hh.net.nats[in.SwitchName]; ok && cur != natPrefix {
		delete(hh.net.nats, in.SwitchName)
		changed = true
	}
	if _, ok := hh.net.nats[in.SwitchName]; !ok && natPrefix != "" {
		if err := hh.newNetNat(in.SwitchName, natPrefix); err != nil {
			return nil, err
		}
		changed = true
	}
	wantScopes := map[string]bool{}
	for _, s := range in.Subnets {
		if s.DhcpStart != "" {
			wantScopes[s.NetworkAddress] = true
		}
	}
	for _, sc := range scopes {
		if !wantScopes[sc.id] {
			hh.removeScope(sc.id)
			changed = true
		}
	}
	for _, s := range in.Subnets {
		if s.DhcpStart == "" {
			continue
		}
		sc := hh.scope(s.NetworkAddress)
		if sc != nil && sc.description != in.ScopeDescription {
			return nil, refuse("NotOwned", "DHCP scope %s on %s ('%s') is not this installation's network %s; it is left alone", s.NetworkAddress, strings.ToUpper(hh.name), sc.name, in.Owner.Name)
		}
		if sc != nil && sc.mask != s.SubnetMask {
			hh.removeScope(sc.id)
			sc = nil
		}
		switch {
		case sc == nil:
			sc = &hvScope{id: s.NetworkAddress, mask: s.SubnetMask, start: s.DhcpStart, end: s.DhcpEnd, name: in.SwitchName, description: in.ScopeDescription}
			hh.net.scopes = append(hh.net.scopes, sc)
			changed = true
		case sc.start != s.DhcpStart || sc.end != s.DhcpEnd:
			sc.start, sc.end, changed = s.DhcpStart, s.DhcpEnd, true
		}
		if sc.router != s.Gateway {
			sc.router, changed = s.Gateway, true
		}
		if sc.dns != s.DnsServer {
			sc.dns, changed = s.DnsServer, true
		}
	}
	return map[string]any{"Changed": changed}, nil
}

func (hh *hvHost) removeScope(id string) {
	kept := hh.net.scopes[:0]
	for _, s := range hh.net.scopes {
		if s.id != id {
			kept = append(kept, s)
		}
	}
	hh.net.scopes = kept
}

// removeNetwork is Remove-HFVirtualNetwork.
func (h *HyperV) removeNetwork(hh *hvHost, in hvInput) (any, *hvError) {
	sw, err := hh.ownedSwitch(in)
	if err != nil {
		return nil, err
	}
	scopes, err := hh.networkScopes(in)
	if err != nil {
		return nil, err
	}
	var removed []string
	if sw != nil {
		var users []string
		for _, vm := range sortedVMs(hh) {
			for _, a := range vm.adapters {
				if a.switchName == sw.name && !containsFold(users, vm.name) {
					users = append(users, vm.name)
				}
			}
		}
		if len(users) > 0 {
			return nil, refuse("Busy", "virtual switch '%s' on %s still connects the network adapters of VMs %s; it is removed once none is connected",
				sw.name, strings.ToUpper(hh.name), strings.Join(users, ", "))
		}
		if _, ok := hh.net.nats[sw.name]; ok {
			delete(hh.net.nats, sw.name)
			removed = append(removed, "NetNat")
		}
	}
	for _, sc := range scopes {
		hh.removeScope(sc.id)
		removed = append(removed, "DhcpScope "+sc.id)
	}
	if sw != nil {
		alias := vEthernet(sw.name)
		hh.removeNetIPAddresses(func(a *hvNetIP) bool { return a.alias != alias })
		delete(hh.switches, sw.name)
		removed = append(removed, "VMSwitch")
	}
	return map[string]any{"Removed": h.strings(removed)}, nil
}

func normalClientID(s string) string { return strings.ToLower(strings.ReplaceAll(s, ":", "-")) }

// setReservation is Set-HFReservation.
func (h *HyperV) setReservation(hh *hvHost, in hvInput) (any, *hvError) {
	ip, perr := netip.ParseAddr(in.IPAddress)
	if perr != nil || !ip.Is4() {
		return nil, refuse("Invalid", "Exception calling \"Parse\" with \"1\" argument(s): \"An invalid IP address was specified.\"")
	}
	scopes, err := hh.networkScopes(in)
	if err != nil {
		return nil, err
	}
	var scope *hvScope
	for _, sc := range scopes {
		if inScope(ip, sc) {
			scope = sc
		}
	}
	if scope == nil {
		return map[string]any{"Reserved": false}, nil
	}
	client := normalClientID(in.ClientID)
	var keep []*hvReservation
	for _, r := range scope.reservations {
		if r.ip != in.IPAddress && normalClientID(r.clientID) != client {
			keep = append(keep, r)
			continue
		}
		same := r.ip == in.IPAddress && normalClientID(r.clientID) == client
		if same && !in.Remove && r.description == in.ScopeDescription {
			return map[string]any{"Reserved": true}, nil
		}
		if r.description != in.ScopeDescription {
			if in.Remove && !same {
				keep = append(keep, r)
				continue
			}
			return nil, refuse("NotOwned", "DHCP reservation of %s for %s in scope %s on %s is not this installation's network %s; it is left alone",
				r.ip, r.clientID, scope.id, strings.ToUpper(hh.name), in.Owner.Name)
		}
		if in.Remove && !same {
			keep = append(keep, r)
		}
		// Remove-DhcpServerv4Reservation otherwise.
	}
	scope.reservations = keep
	if in.Remove {
		return map[string]any{"Reserved": false}, nil
	}
	scope.reservations = append(scope.reservations, &hvReservation{ip: in.IPAddress, clientID: client, description: in.ScopeDescription})
	return map[string]any{"Reserved": true}, nil
}

func inScope(ip netip.Addr, sc *hvScope) bool {
	mask, err1 := netip.ParseAddr(sc.mask)
	id, err2 := netip.ParseAddr(sc.id)
	if err1 != nil || err2 != nil {
		return false
	}
	a, m, n := ip.As4(), mask.As4(), id.As4()
	for i := range a {
		if a[i]&m[i] != n[i] {
			return false
		}
	}
	return true
}

// aclFromLine is ConvertFrom-HFAcl.
func aclFromLine(l string) hvACL {
	f := strings.Split(l, "|")
	for len(f) < 8 {
		f = append(f, "")
	}
	w, _ := strconv.Atoi(f[6])
	return hvACL{Action: f[0], Direction: f[1], RemoteIPAddress: f[2], LocalPort: f[3], RemotePort: f[4], Protocol: f[5], Weight: w, Stateful: f[7] == "1"}
}

// aclKey is ConvertTo-HFAclKey.
func aclKey(a hvACL) string {
	var parts []string
	for _, v := range []string{a.Action, a.Direction, a.RemoteIPAddress, a.LocalPort, a.RemotePort, a.Protocol} {
		if v == "" || strings.EqualFold(v, "ANY") {
			v = "any"
		}
		parts = append(parts, strings.ToLower(v))
	}
	stateful := "False"
	if a.Stateful {
		stateful = "True"
	}
	return strings.Join(parts, "|") + "|" + itoa(a.Weight) + "|" + stateful
}

func aclKeys(acls []hvACL) string {
	keys := make([]string, len(acls))
	for i, a := range acls {
		keys[i] = aclKey(a)
	}
	sort.Strings(keys)
	return strings.Join(keys, ";")
}

// setPortPolicy is Set-HFPortPolicy.
func (h *HyperV) setPortPolicy(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	var a *hvAdapter
	for _, x := range vm.adapters {
		if strings.EqualFold(x.mac, in.MacAddress) {
			a = x
			break
		}
	}
	if a == nil {
		return nil, refuse("NotFound", "VM %s has no network adapter with MAC %s", in.ID, in.MacAddress)
	}
	want := make([]hvACL, len(in.Acls))
	for i, l := range in.Acls {
		want[i] = aclFromLine(l)
	}
	changed := false
	if aclKeys(a.acls) != aclKeys(want) {
		for _, x := range want {
			// Add-VMNetworkAdapterExtendedAcl's own checks.
			if x.Action != "Allow" && x.Action != "Deny" {
				return nil, refuse("Invalid", "Cannot bind parameter 'Action'. Cannot convert value \"%s\" to type \"Microsoft.HyperV.PowerShell.VMNetworkAdapterExtendedAclAction\".", x.Action)
			}
			if x.Direction != "Inbound" && x.Direction != "Outbound" {
				return nil, refuse("Invalid", "Cannot bind parameter 'Direction'. Cannot convert value \"%s\" to type \"Microsoft.HyperV.PowerShell.VMNetworkAdapterExtendedAclDirection\".", x.Direction)
			}
		}
		a.acls = want
		changed = true
	}
	if a.maxBandwidth != in.MaximumBandwidth {
		// Set-VMNetworkAdapter rounds to a multiple of eight.
		a.maxBandwidth, changed = in.MaximumBandwidth/8*8, true
	}
	return map[string]any{"Changed": changed}, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
