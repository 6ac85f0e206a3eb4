package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A VirtualNetwork is a PVE SDN zone holding one VNet with the network's subnets, plus, when it
// has rules, a cluster firewall security group that the VMs' NICs are bound to. Names derive from
// the network's ID (at most 7 lower-case letters and digits, starting with a letter), so they fit
// PVE's limits: zone "z<ID>" and VNet "v<ID>" (SDN IDs have at most 8 characters), security group
// "hfnet-<ID>" (at most 18).
//
// Ownership: a VNet carries the mark in its alias ("hyperfleet hf-o-<hash> <title>"), a security
// group in its comment. A zone has no free-text field, so it is ours only when every VNet in it
// (pending deletions included) is our VNet with our mark. An empty zone of our name is ours only
// while it has never been applied: that is what a crash between creating the zone and its VNet
// leaves behind, and nothing else can have started using it yet. An applied empty zone may be
// anyone's and is never touched (ErrNotOwned); a person removes or renames it.
//
// SDN edits are pending until PUT /cluster/sdn applies them (PVE's "Apply", a reloadnetworkall
// task); EnsureNetwork applies only when its objects have pending edits, its own or those a crash
// left, so ensuring an unchanged network makes no write.

var networkIDRe = regexp.MustCompile(`^[a-z][a-z0-9]{0,6}$`)

// markPrefix starts every ownership mark in an alias or comment.
const markPrefix = "hyperfleet"

func zoneName(id string) string  { return "z" + id }
func vnetName(id string) string  { return "v" + id }
func groupName(id string) string { return "hfnet-" + id }

// aliasRe is what PVE's VNet alias pattern allows (case-insensitively: ( ) and ')'..'_', '.',
// word characters, whitespace).
var aliasForbidden = regexp.MustCompile(`[^()*+,\-./0-9:;<=>?@A-Z\[\\\]^_a-z\s]`)

// mark is the ownership mark with a title for people reading PVE's UI.
func (p *Provider) mark(title string) string {
	s := markPrefix + " " + p.ownerTag
	if title = strings.TrimSpace(aliasForbidden.ReplaceAllString(title, "_")); title != "" {
		s += " " + title
	}
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

// marked reports whether an alias or comment carries this installation's mark.
func (p *Provider) marked(s string) bool {
	f := strings.Fields(s)
	return len(f) >= 2 && f[0] == markPrefix && f[1] == p.ownerTag
}

// checkOwner refuses an owner naming another HypervisorCluster than the provider's: the mark is
// the provider's installation and cluster.
func (p *Provider) checkOwner(op string, owner hypervisor.Ownership) error {
	if owner.Cluster != "" && owner.Cluster != p.cfg.Cluster {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "owner %q is not this provider's cluster %q", owner.Cluster, p.cfg.Cluster)
	}
	return nil
}

// sdnRow is one row of an SDN listing with ?pending=1: running values at the top, pending edits
// under "pending", and the object's state when it has pending edits.
type sdnRow map[string]any

// get is the value the object will have once applied ("" for none).
func (r sdnRow) get(k string) string {
	if p, ok := r["pending"].(map[string]any); ok {
		if v, ok := p[k]; ok {
			if v == "deleted" {
				return ""
			}
			return sdnString(v)
		}
	}
	return sdnString(r[k])
}

func (r sdnRow) state() string { return sdnString(r["state"]) }

func (r sdnRow) deleted() bool { return r.state() == "deleted" }

func sdnString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		if t {
			return "1"
		}
		return "0"
	case []any:
		var parts []string
		for _, it := range t {
			switch r := it.(type) {
			case map[string]any:
				parts = append(parts, "start-address="+sdnString(r["start-address"])+",end-address="+sdnString(r["end-address"]))
			default:
				parts = append(parts, sdnString(r))
			}
		}
		return strings.Join(parts, ";")
	default:
		return fmt.Sprint(t)
	}
}

// sdnView is what EnsureNetwork and DeleteNetwork read of SDN before deciding anything.
type sdnView struct {
	zone, vnet sdnRow
	// zoneVNets are the other VNets in our zone (by name).
	zoneVNets map[string]sdnRow
}

func (p *Provider) readSDN(ctx context.Context, op, id string) (sdnView, error) {
	var zones, vnets []sdnRow
	if err := p.get(ctx, op, "/cluster/sdn/zones?pending=1", &zones); err != nil {
		return sdnView{}, err
	}
	if err := p.get(ctx, op, "/cluster/sdn/vnets?pending=1", &vnets); err != nil {
		return sdnView{}, err
	}
	v := sdnView{zoneVNets: map[string]sdnRow{}}
	for _, z := range zones {
		if sdnString(z["zone"]) == zoneName(id) {
			v.zone = z
		}
	}
	for _, n := range vnets {
		name := sdnString(n["vnet"])
		if name == vnetName(id) {
			v.vnet = n
		}
		zone := n.get("zone")
		if zone == "" {
			zone = sdnString(n["zone"])
		}
		if zone == zoneName(id) && name != vnetName(id) {
			v.zoneVNets[name] = n
		}
	}
	return v, nil
}

// ownedSDN checks that the zone and VNet named for id are ours or absent.
func (p *Provider) ownedSDN(op, id string, v sdnView) error {
	if v.vnet != nil && !p.marked(vnetAlias(v.vnet)) {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "SDN VNet %s (alias %q) lacks the mark %s %s", vnetName(id), vnetAlias(v.vnet), markPrefix, p.ownerTag)
	}
	if v.vnet != nil && v.vnet.get("zone") != zoneName(id) && sdnString(v.vnet["zone"]) != zoneName(id) {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "SDN VNet %s is in zone %q, not %s", vnetName(id), v.vnet.get("zone"), zoneName(id))
	}
	if v.zone == nil || v.zone.deleted() {
		return nil
	}
	if len(v.zoneVNets) > 0 {
		var names []string
		for n := range v.zoneVNets {
			names = append(names, n)
		}
		sort.Strings(names)
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "SDN zone %s also holds VNets %s", zoneName(id), strings.Join(names, ", "))
	}
	if v.vnet == nil && v.zone.state() != "new" {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "SDN zone %s exists, holds no VNet of ours and has been applied: it may be anyone's", zoneName(id))
	}
	return nil
}

// vnetAlias is the alias a VNet has or will have; a pending deletion keeps its running alias.
func vnetAlias(r sdnRow) string {
	if a := r.get("alias"); a != "" {
		return a
	}
	return sdnString(r["alias"])
}

// zoneParams are the zone's options for n.
func zoneParams(n hypervisor.VirtualNetwork) map[string]string {
	z := map[string]string{"ipam": "pve"}
	switch n.Kind {
	case hypervisor.NetworkIsolated:
		z["type"] = "simple"
		for _, s := range n.Subnets {
			if s.DHCPStart.IsValid() {
				z["dhcp"] = "dnsmasq"
			}
		}
	case hypervisor.NetworkVLAN:
		z["type"] = "vlan"
		z["bridge"] = n.Uplink
		if z["bridge"] == "" {
			z["bridge"] = DefaultBridge
		}
	case hypervisor.NetworkVXLAN:
		z["type"] = "vxlan"
		var peers []string
		for _, a := range n.Peers {
			peers = append(peers, a.String())
		}
		z["peers"] = strings.Join(peers, ",")
	}
	if n.MTU > 0 {
		z["mtu"] = strconv.Itoa(n.MTU)
	}
	return z
}

func (p *Provider) vnetParams(n hypervisor.VirtualNetwork) map[string]string {
	v := map[string]string{"zone": zoneName(n.ID), "alias": p.mark(n.Title)}
	switch n.Kind {
	case hypervisor.NetworkVLAN:
		v["tag"] = strconv.Itoa(n.VLAN)
	case hypervisor.NetworkVXLAN:
		v["tag"] = strconv.Itoa(n.VNI)
	}
	return v
}

// subnetID is PVE's ID of a subnet of the zone: "<zone>-<network>-<mask>".
func subnetID(zone string, s hypervisor.Subnet) string {
	return zone + "-" + strings.Replace(s.CIDR.Masked().String(), "/", "-", 1)
}

func subnetParams(s hypervisor.Subnet) map[string]string {
	out := map[string]string{}
	if s.Gateway.IsValid() {
		out["gateway"] = s.Gateway.String()
	}
	if s.SNAT {
		out["snat"] = "1"
	}
	if s.DHCPStart.IsValid() {
		out["dhcp-range"] = "start-address=" + s.DHCPStart.String() + ",end-address=" + s.DHCPEnd.String()
	}
	if s.DNSServer.IsValid() {
		out["dhcp-dns-server"] = s.DNSServer.String()
	}
	return out
}

// body turns string options into the request body, with dhcp-range as PVE's array.
func body(opts map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range opts {
		if k == "dhcp-range" {
			out[k] = strings.Split(v, ";")
			continue
		}
		out[k] = v
	}
	return out
}

// diff is the update that makes have (a pending-view row) match want: the changed options and
// the options to delete among managed.
func diff(have sdnRow, want map[string]string, managed []string) (map[string]string, []string) {
	set := map[string]string{}
	for k, v := range want {
		if have.get(k) != v {
			set[k] = v
		}
	}
	var del []string
	for _, k := range managed {
		if _, ok := want[k]; !ok && have.get(k) != "" {
			del = append(del, k)
		}
	}
	return set, del
}

// EnsureNetwork implements hypervisor.Networker.
func (p *Provider) EnsureNetwork(ctx context.Context, n hypervisor.VirtualNetwork) (hypervisor.NetworkRealization, error) {
	op := "ensure network " + n.ID
	if !networkIDRe.MatchString(n.ID) {
		return hypervisor.NetworkRealization{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "network ID %q is not 1-7 lower-case letters and digits starting with a letter", n.ID)
	}
	if err := p.checkOwner(op, n.Owner); err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	if gaps := p.NetworkGaps(n); len(gaps) > 0 {
		var reasons []string
		for _, g := range gaps {
			reasons = append(reasons, g.Field+": "+g.Reason)
		}
		return hypervisor.NetworkRealization{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "%s", strings.Join(reasons, "; "))
	}
	v, err := p.readSDN(ctx, op, n.ID)
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	if err := p.ownedSDN(op, n.ID, v); err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	group, err := p.readGroup(ctx, op, n.ID)
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	// Every ownership is proven before the first write, so a refusal changes nothing.
	pending, err := p.ensureZone(ctx, op, n, v.zone)
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	vnetPending, err := p.ensureVNet(ctx, op, n, v.vnet)
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	subnetsPending, err := p.ensureSubnets(ctx, op, n, v.vnet != nil && !v.vnet.deleted())
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	if pending || vnetPending || subnetsPending {
		if err := p.applySDN(ctx, op); err != nil {
			return hypervisor.NetworkRealization{}, err
		}
	}
	real := hypervisor.NetworkRealization{Bridge: vnetName(n.ID)}
	if len(n.Rules) > 0 {
		if err := p.ensureGroup(ctx, op, n, group); err != nil {
			return hypervisor.NetworkRealization{}, err
		}
		real.SecurityGroup = groupName(n.ID)
	} else if group != nil {
		if err := p.deleteGroup(ctx, op, n.ID); err != nil {
			return hypervisor.NetworkRealization{}, err
		}
	}
	return real, nil
}

// ensureZone creates or updates the zone; it reports whether the zone has edits to apply.
func (p *Provider) ensureZone(ctx context.Context, op string, n hypervisor.VirtualNetwork, have sdnRow) (bool, error) {
	want := zoneParams(n)
	if have == nil || have.deleted() {
		params := body(want)
		params["zone"] = zoneName(n.ID)
		return true, p.post(ctx, op, "/cluster/sdn/zones", params, nil)
	}
	if t := have.get("type"); t != want["type"] {
		return false, hypervisor.Errorf(hypervisor.ErrInvalid, op, "SDN zone %s is of type %s, not %s: PVE cannot change a zone's type; delete the network first", zoneName(n.ID), t, want["type"])
	}
	delete(want, "type")
	set, del := diff(have, want, []string{"dhcp", "mtu", "bridge", "peers"})
	if len(set) == 0 && len(del) == 0 {
		return have.state() != "", nil
	}
	params := body(set)
	if len(del) > 0 {
		params["delete"] = strings.Join(del, ",")
	}
	return true, p.put(ctx, op, "/cluster/sdn/zones/"+zoneName(n.ID), params, nil)
}

func (p *Provider) ensureVNet(ctx context.Context, op string, n hypervisor.VirtualNetwork, have sdnRow) (bool, error) {
	want := p.vnetParams(n)
	if have == nil || have.deleted() {
		params := body(want)
		params["vnet"] = vnetName(n.ID)
		return true, p.post(ctx, op, "/cluster/sdn/vnets", params, nil)
	}
	set, del := diff(have, want, []string{"tag"})
	if len(set) == 0 && len(del) == 0 {
		return have.state() != "", nil
	}
	params := body(set)
	if len(del) > 0 {
		params["delete"] = strings.Join(del, ",")
	}
	return true, p.put(ctx, op, "/cluster/sdn/vnets/"+vnetName(n.ID), params, nil)
}

// ensureSubnets makes the VNet's subnets n's; existed says whether the VNet was there to list.
func (p *Provider) ensureSubnets(ctx context.Context, op string, n hypervisor.VirtualNetwork, existed bool) (bool, error) {
	vnet := vnetName(n.ID)
	have := map[string]sdnRow{}
	if existed {
		var rows []sdnRow
		if err := p.get(ctx, op, "/cluster/sdn/vnets/"+vnet+"/subnets?pending=1", &rows); err != nil {
			return false, err
		}
		for _, r := range rows {
			have[sdnString(r["subnet"])] = r
		}
	}
	changed := false
	want := map[string]bool{}
	for _, s := range n.Subnets {
		id := subnetID(zoneName(n.ID), s)
		want[id] = true
		opts := subnetParams(s)
		row, ok := have[id]
		if !ok || row.deleted() {
			params := body(opts)
			params["subnet"], params["type"] = s.CIDR.Masked().String(), "subnet"
			if err := p.post(ctx, op, "/cluster/sdn/vnets/"+vnet+"/subnets", params, nil); err != nil {
				return false, err
			}
			changed = true
			continue
		}
		set, del := diff(row, opts, []string{"gateway", "snat", "dhcp-range", "dhcp-dns-server"})
		if len(set) == 0 && len(del) == 0 {
			changed = changed || row.state() != ""
			continue
		}
		params := body(set)
		if len(del) > 0 {
			params["delete"] = strings.Join(del, ",")
		}
		if err := p.put(ctx, op, "/cluster/sdn/vnets/"+vnet+"/subnets/"+id, params, nil); err != nil {
			return false, err
		}
		changed = true
	}
	for id, row := range have {
		if want[id] {
			continue
		}
		if row.deleted() {
			changed = true
			continue
		}
		if err := p.delete(ctx, op, "/cluster/sdn/vnets/"+vnet+"/subnets/"+id, nil); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// applySDN applies the pending SDN edits (PUT /cluster/sdn) and waits for the reload task: a
// failed reload leaves the network unusable and is reported.
func (p *Provider) applySDN(ctx context.Context, op string) error {
	var upid string
	if err := p.put(ctx, op, "/cluster/sdn", nil, &upid); err != nil {
		return err
	}
	if upid == "" {
		return nil
	}
	return p.waitTask(ctx, op, upid)
}

// DeleteNetwork implements hypervisor.Networker.
func (p *Provider) DeleteNetwork(ctx context.Context, id string, owner hypervisor.Ownership) error {
	op := "delete network " + id
	if !networkIDRe.MatchString(id) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "network ID %q is not 1-7 lower-case letters and digits starting with a letter", id)
	}
	if err := p.checkOwner(op, owner); err != nil {
		return err
	}
	v, err := p.readSDN(ctx, op, id)
	if err != nil {
		return err
	}
	if err := p.ownedSDN(op, id, v); err != nil {
		return err
	}
	group, err := p.readGroup(ctx, op, id)
	if err != nil {
		return err
	}
	if group != nil {
		if err := p.deleteGroup(ctx, op, id); err != nil {
			return err
		}
	}
	pending := false
	if v.vnet != nil && !v.vnet.deleted() {
		if err := p.releaseAll(ctx, op, id); err != nil {
			return err
		}
		if _, err := p.ensureSubnets(ctx, op, hypervisor.VirtualNetwork{ID: id}, true); err != nil {
			return err
		}
		if err := p.delete(ctx, op, "/cluster/sdn/vnets/"+vnetName(id), nil); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			return err
		}
		pending = true
	}
	if v.zone != nil && !v.zone.deleted() {
		if err := p.delete(ctx, op, "/cluster/sdn/zones/"+zoneName(id), nil); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			return err
		}
		pending = true
	}
	if pending || (v.vnet != nil && v.vnet.deleted()) || (v.zone != nil && v.zone.deleted()) {
		return p.applySDN(ctx, op)
	}
	return nil
}

// ipamEntry is one row of GET /cluster/sdn/ipams/pve/status.
type ipamEntry struct {
	VNet    string `json:"vnet"`
	Zone    string `json:"zone"`
	IP      string `json:"ip"`
	MAC     string `json:"mac"`
	Gateway number `json:"gateway"`
}

func (p *Provider) ipamEntries(ctx context.Context, op string) ([]ipamEntry, error) {
	var rows []ipamEntry
	err := p.get(ctx, op, "/cluster/sdn/ipams/pve/status", &rows)
	return rows, err
}

// releaseAll removes the addresses still reserved on the network's VNet: PVE refuses to delete a
// subnet whose IPAM holds addresses.
func (p *Provider) releaseAll(ctx context.Context, op, id string) error {
	rows, err := p.ipamEntries(ctx, op)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.VNet != vnetName(id) || r.Gateway != 0 {
			continue
		}
		if err := p.delete(ctx, op, ipsPath(id, r.IP, r.MAC), nil); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			return err
		}
	}
	return nil
}

func ipsPath(id, ip, mac string) string {
	q := url.Values{"zone": {zoneName(id)}, "ip": {ip}}
	if mac != "" {
		q.Set("mac", mac)
	}
	return "/cluster/sdn/vnets/" + vnetName(id) + "/ips?" + q.Encode()
}

// ownedVNet reads the network's VNet and proves it ours; ErrNotFound when it does not exist.
func (p *Provider) ownedVNet(ctx context.Context, op, id string, owner hypervisor.Ownership) error {
	if !networkIDRe.MatchString(id) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "network ID %q is not 1-7 lower-case letters and digits starting with a letter", id)
	}
	if err := p.checkOwner(op, owner); err != nil {
		return err
	}
	var row sdnRow
	if err := p.get(ctx, op, "/cluster/sdn/vnets/"+vnetName(id), &row); err != nil {
		return err
	}
	if !p.marked(sdnString(row["alias"])) || sdnString(row["zone"]) != zoneName(id) {
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "SDN VNet %s (alias %q) lacks the mark %s %s", vnetName(id), sdnString(row["alias"]), markPrefix, p.ownerTag)
	}
	return nil
}

// ReserveAddress implements hypervisor.Networker: the address goes into PVE's IPAM for the MAC,
// so the zone's DHCP server hands it to that NIC.
func (p *Provider) ReserveAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	op := fmt.Sprintf("reserve %s on network %s", ip, id)
	if err := p.ownedVNet(ctx, op, id, owner); err != nil {
		return err
	}
	mac = strings.ToLower(mac)
	err := p.post(ctx, op, ipsPath(id, ip.String(), mac), nil, nil)
	if err == nil || !strings.Contains(errorText(err), "already exist") {
		return err
	}
	// A retry finds its own reservation: the same address for the same MAC is done.
	rows, lerr := p.ipamEntries(ctx, op)
	if lerr != nil {
		return lerr
	}
	for _, r := range rows {
		if r.VNet == vnetName(id) && r.IP == ip.String() && strings.EqualFold(r.MAC, mac) {
			return nil
		}
	}
	return hypervisor.Errorf(hypervisor.ErrAlreadyExists, op, "%s is reserved for another NIC: %v", ip, err)
}

// ReleaseAddress implements hypervisor.Networker.
func (p *Provider) ReleaseAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	op := fmt.Sprintf("release %s on network %s", ip, id)
	if err := p.ownedVNet(ctx, op, id, owner); err != nil {
		if errors.Is(err, hypervisor.ErrNotFound) {
			return nil
		}
		return err
	}
	err := p.delete(ctx, op, ipsPath(id, ip.String(), strings.ToLower(mac)), nil)
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil
	}
	return err
}
