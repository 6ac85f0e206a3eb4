package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// PVE's SDN keeps two copies of its configuration: the files under /etc/pve/sdn that every API
// write changes (zones.cfg, vnets.cfg, subnets.cfg), and the running configuration that
// PUT /cluster/sdn commits from them before it reloads every node's network. Until then an edit is
// pending: the GET lists show the files' state, ?running=1 the committed one and ?pending=1 both,
// with each object's state (new, changed, deleted). A VM can only plug into a VNet that is running.

// sdnSection is one SDN object as its section config holds it; dhcp-range items are NUL-joined.
type sdnSection map[string]string

// sdnConfig holds the zones, vnets and subnets sections by ID.
type sdnConfig struct {
	zones, vnets, subnets map[string]sdnSection
}

func newSDNConfig() sdnConfig {
	return sdnConfig{zones: map[string]sdnSection{}, vnets: map[string]sdnSection{}, subnets: map[string]sdnSection{}}
}

func (c sdnConfig) clone() sdnConfig {
	out := newSDNConfig()
	for dst, src := range map[*map[string]sdnSection]map[string]sdnSection{&out.zones: c.zones, &out.vnets: c.vnets, &out.subnets: c.subnets} {
		for id, sec := range src {
			cp := sdnSection{}
			for k, v := range sec {
				cp[k] = v
			}
			(*dst)[id] = cp
		}
	}
	return out
}

func (c sdnConfig) kind(kind string) map[string]sdnSection {
	switch kind {
	case "zones":
		return c.zones
	case "vnets":
		return c.vnets
	default:
		return c.subnets
	}
}

// ipamEntry is one address in PVE's own IPAM (/etc/pve/priv/ipam.db): a subnet's gateway or a
// NIC's address.
type ipamEntry struct {
	zone, vnet, subnet string // subnet: its ID ("zone-10.0.0.0-24")
	cidr               netip.Prefix
	ip                 netip.Addr
	mac                string
	vmid               int
	gateway            bool
}

type sdnState struct {
	config, running sdnConfig
	ipam            []*ipamEntry
}

func newSDNState() *sdnState {
	return &sdnState{config: newSDNConfig(), running: newSDNConfig()}
}

// Integer and boolean keys, so that JSON answers carry numbers where PVE's do.
var sdnIntKeys = map[string]bool{"mtu": true, "tag": true, "vxlan-port": true, "vrf-vxlan": true, "dp-id": true}

var sdnBoolKeys = map[string]bool{"snat": true, "isolate-ports": true, "vlanaware": true, "advertise-subnets": true,
	"bridge-disable-mac-learning": true, "disable-arp-nd-suppression": true, "exitnodes-local-routing": true}

func sdnValue(k, v string) any {
	switch {
	case k == "dhcp-range":
		var out []map[string]string
		for _, r := range strings.Split(v, "\x00") {
			m := map[string]string{}
			for _, part := range strings.Split(r, ",") {
				if key, val, ok := strings.Cut(part, "="); ok {
					m[key] = val
				}
			}
			out = append(out, m)
		}
		return out
	case sdnIntKeys[k], sdnBoolKeys[k]:
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return v
}

func sdnDigest(c map[string]sdnSection) string {
	var b strings.Builder
	for _, id := range sortedSectionIDs(c) {
		fmt.Fprintf(&b, "%s\n", id)
		for _, k := range sortedKeys(c[id]) {
			fmt.Fprintf(&b, "\t%s %s\n", k, c[id][k])
		}
	}
	sum := sha1.Sum([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func sortedSectionIDs(c map[string]sdnSection) []string {
	ids := make([]string, 0, len(c))
	for id := range c {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// sdnJSON renders one section as PVE's API does: its ID under idKey, typed values, and for
// subnets the parts of the ID.
func sdnJSON(idKey, id string, sec sdnSection) map[string]any {
	out := map[string]any{idKey: id}
	for k, v := range sec {
		out[k] = sdnValue(k, v)
	}
	if idKey == "subnet" {
		if zone, rest, ok := strings.Cut(id, "-"); ok {
			network, mask, _ := strings.Cut(rest, "-")
			out["zone"], out["network"], out["mask"], out["cidr"] = zone, network, mask, network+"/"+mask
		}
	}
	return out
}

// pendingView is PVE::Network::SDN::pending_config: running values at the top, what the files
// change under "pending", and the object's state.
func pendingView(running, config map[string]sdnSection, idKey string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, run := range running {
		e := sdnJSON(idKey, id, run)
		cfg, inConfig := config[id]
		pending := map[string]any{}
		switch {
		case !inConfig:
			e["state"] = "deleted"
		default:
			for k, v := range run {
				if cv, ok := cfg[k]; !ok {
					pending[k] = "deleted"
					e["state"] = "changed"
				} else if cv != v {
					e["state"] = "changed"
				}
			}
		}
		e["pending"] = pending
		out[id] = e
	}
	for id, cfg := range config {
		run, inRunning := running[id]
		e, ok := out[id]
		if !ok {
			e = map[string]any{idKey: id, "pending": map[string]any{}}
			out[id] = e
		}
		pending := e["pending"].(map[string]any)
		for k, v := range cfg {
			if k == "type" || (idKey == "subnet" && k == "vnet") {
				e[k] = sdnValue(k, v)
				continue
			}
			if rv, ok := run[k]; !ok || rv != v {
				pending[k] = sdnValue(k, v)
				if inRunning {
					e["state"] = "changed"
				}
			}
		}
		if !inRunning {
			e["state"] = "new"
		}
	}
	for _, e := range out {
		if p, _ := e["pending"].(map[string]any); len(p) == 0 && e["state"] == nil {
			delete(e, "pending")
		}
	}
	return out
}

// sdnList answers an SDN index or read: the files, ?running=1 or ?pending=1.
func (s *Simulator) sdnList(rq *request, kind, idKey string, keep func(id string, sec sdnSection) bool) []map[string]any {
	cfg, run := s.sdn.config.kind(kind), s.sdn.running.kind(kind)
	var rows map[string]map[string]any
	switch {
	case rq.p.flag("pending"):
		rows = pendingView(run, cfg, idKey)
	case rq.p.flag("running"):
		rows = map[string]map[string]any{}
		for id, sec := range run {
			rows[id] = sdnJSON(idKey, id, sec)
		}
	default:
		rows = map[string]map[string]any{}
		digest := sdnDigest(cfg)
		for id, sec := range cfg {
			rows[id] = sdnJSON(idKey, id, sec)
			rows[id]["digest"] = digest
		}
	}
	ids := make([]string, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []map[string]any{}
	for _, id := range ids {
		sec := cfg[id]
		if sec == nil {
			sec = run[id]
		}
		if keep == nil || keep(id, sec) {
			out = append(out, rows[id])
		}
	}
	return out
}

// --- /cluster/sdn -----------------------------------------------------------

func (s *Simulator) getSDN(*request) (any, *apiError) {
	return []map[string]any{{"id": "controllers"}, {"id": "dns"}, {"id": "fabrics"}, {"id": "ipams"},
		{"id": "vnets"}, {"id": "zones"}}, nil
}

// putSDN commits the files to the running configuration and reloads every node's network in a
// reloadnetworkall task, as PVE's "Apply" does.
func (s *Simulator) putSDN(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sdn.running = s.sdn.config.clone()
	node := s.nodes[0].name
	t := s.startTask(node, "reloadnetworkall", "", rq.auth, taskWork{run: func(t *task) error {
		for _, n := range s.nodes {
			t.log = append(t.log, n.name+": reloading network config")
		}
		return nil
	}}, "PUT /cluster/sdn")
	return t.upid, nil
}

// --- zones ------------------------------------------------------------------

var sdnIDRe = mustRe(`(?i)^[a-z][a-z0-9]*[a-z0-9]$`)

// checkSDNID is parse_sdn_zone_id / parse_sdn_vnet_id.
func checkSDNID(what, id string) string {
	if !sdnIDRe.MatchString(id) {
		return fmt.Sprintf("%s ID '%s' contains illegal characters\n", what, id)
	}
	if len(id) > 8 {
		return fmt.Sprintf("%s ID '%s' can't be more length than 8 characters\n", what, id)
	}
	return ""
}

// zoneKeys are the options each zone type takes (PVE's section config options per plugin).
var zoneKeys = map[string]map[string]bool{
	"simple": {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "dhcp": true},
	"vlan":   {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "bridge": true, "bridge-disable-mac-learning": true},
	"vxlan":  {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "peers": true, "vxlan-port": true, "fabric": true},
	"qinq":   {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "bridge": true, "tag": true, "vlan-protocol": true},
	"evpn":   {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "controller": true, "vrf-vxlan": true, "mac": true, "exitnodes": true, "exitnodes-primary": true, "exitnodes-local-routing": true, "advertise-subnets": true, "disable-arp-nd-suppression": true, "rt-import": true, "dhcp": true},
	"faucet": {"nodes": true, "ipam": true, "dns": true, "reversedns": true, "dnszone": true, "mtu": true, "dp-id": true},
}

// zoneOptions checks the options of a zone of type typ as check_config does: an option the
// type does not take is "property is not defined in schema".
func zoneOptions(typ string, p params, skip ...string) (sdnSection, map[string]string) {
	errs := map[string]string{}
	sec := sdnSection{}
	allowed := zoneKeys[typ]
	skipped := map[string]bool{"zone": true, "type": true, "lock-token": true, "digest": true, "delete": true}
	for _, k := range skip {
		skipped[k] = true
	}
	for k, v := range p {
		if skipped[k] {
			continue
		}
		if !allowed[k] {
			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
			continue
		}
		sec[k] = v.s
	}
	if typ == "vlan" && sec["bridge"] == "" && p["bridge"].s == "" {
		errs["bridge"] = "property is missing and it is not optional"
	}
	if typ == "vxlan" && sec["peers"] == "" && sec["fabric"] == "" {
		errs["peers"] = "must have a fabric or peers"
	}
	if sec["dhcp"] != "" && sec["ipam"] == "" {
		sec["ipam"] = "pve"
	}
	return sec, errs
}

func (s *Simulator) getZones(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := rq.p.get("type")
	return s.sdnList(rq, "zones", "zone", func(_ string, sec sdnSection) bool { return typ == "" || sec["type"] == typ }), nil
}

func (s *Simulator) getZone(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("zone")
	for _, row := range s.sdnList(rq, "zones", "zone", func(zid string, _ sdnSection) bool { return zid == id }) {
		return row, nil
	}
	return nil, errf("sdn '%s' does not exist", id)
}

func (s *Simulator) postZone(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, typ := rq.p.get("zone"), rq.p.get("type")
	if msg := checkSDNID("zone", id); msg != "" {
		return nil, paramErr(map[string]string{"zone": "invalid format - " + msg})
	}
	sec, errs := zoneOptions(typ, rq.p)
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	if _, ok := s.sdn.config.zones[id]; ok {
		return nil, errf("create sdn zone object failed: sdn zone object ID '%s' already defined", id)
	}
	if sec["dhcp"] != "" && typ != "simple" && typ != "evpn" {
		return nil, paramErr(map[string]string{"dhcp": "property is not defined in schema and the schema does not allow additional properties"})
	}
	sec["type"] = typ
	s.sdn.config.zones[id] = sec
	return nil, nil
}

func (s *Simulator) putZone(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("zone")
	sec, ok := s.sdn.config.zones[id]
	if !ok {
		return nil, errf("update sdn zone object failed: sdn zone '%s' does not exist", id)
	}
	if d := rq.p.get("digest"); d != "" && d != sdnDigest(s.sdn.config.zones) {
		return nil, errf("update sdn zone object failed: detected modified configuration - file changed by other user? Try again.")
	}
	opts, errs := zoneOptions(sec["type"], rq.p, "bridge-check")
	delete(errs, "bridge")
	delete(errs, "peers")
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	for _, k := range splitList(rq.p.get("delete")) {
		delete(sec, k)
	}
	for k, v := range opts {
		sec[k] = v
	}
	return nil, nil
}

func (s *Simulator) deleteZone(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("zone")
	if _, ok := s.sdn.config.zones[id]; !ok {
		return nil, errf("delete sdn zone object failed: sdn zone '%s' does not exist", id)
	}
	for _, vid := range sortedSectionIDs(s.sdn.config.vnets) {
		if s.sdn.config.vnets[vid]["zone"] == id {
			return nil, errf("delete sdn zone object failed: zone %s is used by vnet %s at /usr/share/perl5/PVE/Network/SDN/Zones/Plugin.pm line 159.", id, vid)
		}
	}
	delete(s.sdn.config.zones, id)
	return nil, nil
}

// --- vnets ------------------------------------------------------------------

func (s *Simulator) getVNets(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sdnList(rq, "vnets", "vnet", nil), nil
}

func (s *Simulator) getVNet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("vnet")
	for _, row := range s.sdnList(rq, "vnets", "vnet", func(vid string, _ sdnSection) bool { return vid == id }) {
		return row, nil
	}
	return nil, errf("sdn vnet '%s' does not exist", id)
}

// checkVNetTag is the zone plugin's vnet_update_hook.
func checkVNetTag(zoneType, tag string) map[string]string {
	switch zoneType {
	case "simple":
		if tag != "" {
			return map[string]string{"tag": "vlan tag is not allowed on simple zone"}
		}
	case "vlan":
		if tag == "" {
			return map[string]string{"tag": "missing vlan tag"}
		}
		if n, _ := strconv.Atoi(tag); n > 4094 {
			return map[string]string{"tag": "vlan tag max value is 4094"}
		}
	case "vxlan":
		if tag == "" {
			return map[string]string{"tag": "missing vxlan tag"}
		}
	}
	return nil
}

func (s *Simulator) postVNet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("vnet")
	if msg := checkSDNID("vnet", id); msg != "" {
		return nil, paramErr(map[string]string{"vnet": "invalid format - " + msg})
	}
	if _, ok := s.sdn.config.vnets[id]; ok {
		return nil, errf("create sdn vnet object failed: sdn vnet object ID '%s' already defined", id)
	}
	zoneID := rq.p.get("zone")
	zone, ok := s.sdn.config.zones[zoneID]
	if !ok {
		return nil, errf("create sdn vnet object failed: sdn zone '%s' does not exist", zoneID)
	}
	if errs := checkVNetTag(zone["type"], rq.p.get("tag")); errs != nil {
		return nil, paramErr(errs)
	}
	sec := sdnSection{"type": "vnet", "zone": zoneID}
	for _, k := range []string{"alias", "tag", "vlanaware", "isolate-ports"} {
		if v, ok := rq.p.str(k); ok {
			sec[k] = v
		}
	}
	s.sdn.config.vnets[id] = sec
	return nil, nil
}

func (s *Simulator) putVNet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("vnet")
	sec, ok := s.sdn.config.vnets[id]
	if !ok {
		return nil, errf("sdn vnet '%s' does not exist", id)
	}
	if d := rq.p.get("digest"); d != "" && d != sdnDigest(s.sdn.config.vnets) {
		return nil, errf("update sdn vnet object failed: detected modified configuration - file changed by other user? Try again.")
	}
	if z, ok := rq.p.str("zone"); ok && z != sec["zone"] && len(s.vnetSubnets(id)) > 0 {
		return nil, paramErr(map[string]string{"zone": "can't change zone if subnets exist"})
	}
	for _, k := range splitList(rq.p.get("delete")) {
		delete(sec, k)
	}
	for _, k := range []string{"alias", "tag", "vlanaware", "isolate-ports", "zone"} {
		if v, ok := rq.p.str(k); ok {
			sec[k] = v
		}
	}
	return nil, nil
}

func (s *Simulator) deleteVNet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("vnet")
	if _, ok := s.sdn.config.vnets[id]; !ok {
		return nil, errf("sdn vnet '%s' does not exist", id)
	}
	if len(s.vnetSubnets(id)) > 0 {
		return nil, errf("delete sdn vnet object failed: Can't delete vnet if subnets exists")
	}
	delete(s.sdn.config.vnets, id)
	return nil, nil
}

// --- subnets ----------------------------------------------------------------

// vnetSubnets are the IDs of the subnets of vnet in the files.
func (s *Simulator) vnetSubnets(vnet string) []string {
	var out []string
	for _, id := range sortedSectionIDs(s.sdn.config.subnets) {
		if s.sdn.config.subnets[id]["vnet"] == vnet {
			out = append(out, id)
		}
	}
	return out
}

func (s *Simulator) getSubnets(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnet := rq.p.get("vnet")
	return s.sdnList(rq, "subnets", "subnet", func(_ string, sec sdnSection) bool { return sec["vnet"] == vnet }), nil
}

// subnetID resolves the {subnet} of a URL: PVE takes the ID ("zone-10.0.0.0-24") or a CIDR.
func (s *Simulator) subnetID(vnet, raw string) string {
	if strings.Contains(raw, "/") {
		if v, ok := s.sdn.config.vnets[vnet]; ok {
			return v["zone"] + "-" + strings.Replace(raw, "/", "-", 1)
		}
	}
	return raw
}

func (s *Simulator) getSubnet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnet := rq.p.get("vnet")
	id := s.subnetID(vnet, rq.p.get("subnet"))
	for _, row := range s.sdnList(rq, "subnets", "subnet", func(sid string, sec sdnSection) bool { return sid == id && sec["vnet"] == vnet }) {
		return row, nil
	}
	return nil, errf("sdn subnet '%s' does not exist", id)
}

// checkDHCPRanges parses pve-sdn-dhcp-range items and checks they lie in cidr.
func checkDHCPRanges(cidr netip.Prefix, ranges []string) map[string]string {
	for _, r := range ranges {
		kv := map[string]string{}
		for _, part := range strings.Split(r, ",") {
			k, v, _ := strings.Cut(part, "=")
			kv[k] = v
		}
		start, err1 := netip.ParseAddr(kv["start-address"])
		end, err2 := netip.ParseAddr(kv["end-address"])
		if err1 != nil || err2 != nil {
			return map[string]string{"dhcp-range": "invalid format - value does not look like a valid dhcp range\n"}
		}
		if !cidr.Contains(start) || !cidr.Contains(end) {
			return map[string]string{"dhcp-range": fmt.Sprintf("range %s - %s is not in subnet %s", start, end, cidr)}
		}
		if end.Less(start) {
			return map[string]string{"dhcp-range": fmt.Sprintf("start address %s is larger than end address %s", start, end)}
		}
	}
	return nil
}

func (s *Simulator) subnetOptions(rq *request, cidr netip.Prefix) (sdnSection, *apiError) {
	sec := sdnSection{}
	if gw, ok := rq.p.str("gateway"); ok {
		ip, err := netip.ParseAddr(gw)
		if err != nil {
			return nil, paramErr(map[string]string{"gateway": "invalid format - value does not look like a valid IP address\n"})
		}
		if !cidr.Contains(ip) {
			return nil, paramErr(map[string]string{"gateway": fmt.Sprintf("gateway %s is not in subnet %s", ip, cidr)})
		}
		sec["gateway"] = gw
	}
	if v, ok := rq.p.str("snat"); ok {
		sec["snat"] = v
	}
	if v, ok := rq.p.str("dhcp-dns-server"); ok {
		sec["dhcp-dns-server"] = v
	}
	if v, ok := rq.p["dhcp-range"]; ok {
		ranges := splitNul(v.s)
		if errs := checkDHCPRanges(cidr, ranges); errs != nil {
			return nil, paramErr(errs)
		}
		sec["dhcp-range"] = strings.Join(ranges, "\x00")
	}
	return sec, nil
}

func splitNul(v string) []string {
	var out []string
	for _, s := range strings.Split(v, "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (s *Simulator) postSubnet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnetID := rq.p.get("vnet")
	cidr, err := netip.ParsePrefix(rq.p.get("subnet"))
	if err != nil || cidr.Masked() != cidr {
		return nil, paramErr(map[string]string{"subnet": "invalid format - value does not look like a valid CIDR network\n"})
	}
	vnet, ok := s.sdn.config.vnets[vnetID]
	if !ok {
		return nil, errf("create sdn subnet object failed: sdn vnet '%s' does not exist", vnetID)
	}
	zoneID := vnet["zone"]
	id := zoneID + "-" + strings.Replace(cidr.String(), "/", "-", 1)
	if _, ok := s.sdn.config.subnets[id]; ok {
		return nil, errf("create sdn subnet object failed: sdn subnet object ID '%s' already defined", id)
	}
	sec, aerr := s.subnetOptions(rq, cidr)
	if aerr != nil {
		return nil, aerr
	}
	sec["type"], sec["vnet"] = "subnet", vnetID
	s.sdn.config.subnets[id] = sec
	if gw := sec["gateway"]; gw != "" && s.sdn.config.zones[zoneID]["ipam"] != "" {
		ip, _ := netip.ParseAddr(gw)
		s.sdn.ipam = append(s.sdn.ipam, &ipamEntry{zone: zoneID, vnet: vnetID, subnet: id, cidr: cidr, ip: ip, gateway: true})
	}
	return nil, nil
}

func (s *Simulator) putSubnet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnetID := rq.p.get("vnet")
	id := s.subnetID(vnetID, rq.p.get("subnet"))
	sec, ok := s.sdn.config.subnets[id]
	if !ok || sec["vnet"] != vnetID {
		return nil, errf("update sdn subnet object failed: sdn subnet '%s' does not exist", id)
	}
	cidr := subnetPrefix(id)
	opts, aerr := s.subnetOptions(rq, cidr)
	if aerr != nil {
		return nil, aerr
	}
	for _, k := range splitList(rq.p.get("delete")) {
		delete(sec, k)
	}
	for k, v := range opts {
		sec[k] = v
	}
	return nil, nil
}

// subnetPrefix is the CIDR of a subnet ID ("zone-10.0.0.0-24").
func subnetPrefix(id string) netip.Prefix {
	_, rest, _ := strings.Cut(id, "-")
	network, mask, _ := strings.Cut(rest, "-")
	p, _ := netip.ParsePrefix(network + "/" + mask)
	return p
}

func (s *Simulator) deleteSubnet(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnetID := rq.p.get("vnet")
	id := s.subnetID(vnetID, rq.p.get("subnet"))
	sec, ok := s.sdn.config.subnets[id]
	if !ok || sec["vnet"] != vnetID {
		return nil, errf("delete sdn subnet object failed: sdn subnet '%s' does not exist", id)
	}
	var keep []*ipamEntry
	for _, e := range s.sdn.ipam {
		if e.subnet == id && !e.gateway {
			return nil, errf("delete sdn subnet object failed: cannot delete subnet '%s', not empty", subnetPrefix(id))
		}
		if e.subnet != id {
			keep = append(keep, e)
		}
	}
	s.sdn.ipam = keep
	delete(s.sdn.config.subnets, id)
	return nil, nil
}

// --- IPAM -------------------------------------------------------------------

// ipSubnet finds the subnet of vnet holding ip, as find_ip_subnet does.
func (s *Simulator) ipSubnet(vnet string, ip netip.Addr) (string, *apiError) {
	for _, id := range s.vnetSubnets(vnet) {
		if subnetPrefix(id).Contains(ip) {
			return id, nil
		}
	}
	return "", errf("can't find any subnet for ip %s at /usr/share/perl5/PVE/Network/SDN/Subnets.pm line 86.", ip)
}

func (s *Simulator) ipsTarget(rq *request) (sdnSection, netip.Addr, *apiError) {
	vnetID := rq.p.get("vnet")
	vnet, ok := s.sdn.config.vnets[vnetID]
	if !ok {
		return nil, netip.Addr{}, errf("sdn vnet '%s' does not exist", vnetID)
	}
	if vnet["zone"] != rq.p.get("zone") {
		return nil, netip.Addr{}, paramErr(map[string]string{"zone": fmt.Sprintf("vnet %s is not in zone %s", vnetID, rq.p.get("zone"))})
	}
	ip, err := netip.ParseAddr(rq.p.get("ip"))
	if err != nil {
		return nil, netip.Addr{}, paramErr(map[string]string{"ip": "invalid format - value does not look like a valid IP address\n"})
	}
	return vnet, ip, nil
}

func (s *Simulator) postIPs(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnet, ip, aerr := s.ipsTarget(rq)
	if aerr != nil {
		return nil, aerr
	}
	zoneID, vnetID := vnet["zone"], rq.p.get("vnet")
	if s.sdn.config.zones[zoneID]["ipam"] == "" {
		return nil, nil // a zone without IPAM records nothing
	}
	subnet, aerr := s.ipSubnet(vnetID, ip)
	if aerr != nil {
		return nil, aerr
	}
	for _, e := range s.sdn.ipam {
		if e.zone == zoneID && e.ip == ip {
			return nil, errf("IP '%s' already exist", ip)
		}
	}
	s.sdn.ipam = append(s.sdn.ipam, &ipamEntry{zone: zoneID, vnet: vnetID, subnet: subnet, cidr: subnetPrefix(subnet), ip: ip,
		mac: strings.ToLower(rq.p.get("mac")), vmid: atoiOr(rq.p.get("vmid"), 0)})
	return nil, nil
}

func (s *Simulator) putIPs(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnet, ip, aerr := s.ipsTarget(rq)
	if aerr != nil {
		return nil, aerr
	}
	for _, e := range s.sdn.ipam {
		if e.zone == vnet["zone"] && e.ip == ip && !e.gateway {
			e.mac, e.vmid = strings.ToLower(rq.p.get("mac")), atoiOr(rq.p.get("vmid"), e.vmid)
			return nil, nil
		}
	}
	return nil, errf("IP '%s' does not exist in IPAM", ip)
}

func (s *Simulator) deleteIPs(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vnet, ip, aerr := s.ipsTarget(rq)
	if aerr != nil {
		return nil, aerr
	}
	var keep []*ipamEntry
	for _, e := range s.sdn.ipam {
		if e.zone == vnet["zone"] && e.ip == ip && !e.gateway {
			continue
		}
		keep = append(keep, e)
	}
	s.sdn.ipam = keep
	return nil, nil
}

// getIPAMStatus is GET /cluster/sdn/ipams/{ipam}/status: every address of PVE's IPAM.
func (s *Simulator) getIPAMStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := rq.p.get("ipam"); id != "pve" {
		return nil, errf("sdn ipam '%s' does not exist", id)
	}
	out := []map[string]any{}
	for _, e := range s.sdn.ipam {
		row := map[string]any{"zone": e.zone, "vnet": e.vnet, "subnet": e.cidr.String(), "ip": e.ip.String()}
		if e.gateway {
			row["gateway"] = 1
		} else {
			if e.mac != "" {
				row["mac"] = e.mac
			}
			if e.vmid != 0 {
				row["vmid"] = strconv.Itoa(e.vmid)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// dropVMAddresses removes the IPAM entries of a destroyed VM's NICs, as qemu-server's destroy
// does (delete_ifaces_ipams_ips). Called with s.mu held.
func (s *Simulator) dropVMAddresses(vm *vmState) {
	macs := map[string]bool{}
	for k, v := range vm.conf {
		if strings.HasPrefix(k, "net") && hotplugKeyRe.MatchString(k) {
			if mac := netMAC(v); mac != "" {
				macs[strings.ToLower(mac)] = true
			}
		}
	}
	var keep []*ipamEntry
	for _, e := range s.sdn.ipam {
		if !e.gateway && (macs[e.mac] || (e.vmid == vm.vmid && e.vmid != 0)) {
			continue
		}
		keep = append(keep, e)
	}
	s.sdn.ipam = keep
}

// checkBridges fails a VM start whose NIC names an SDN VNet that is not running (created but not
// applied, or deleted and applied), as PVE's tap_plug does. Called with s.mu held.
func (s *Simulator) checkBridges(vm *vmState) *apiError {
	for _, k := range sortedKeys(vm.conf) {
		if !strings.HasPrefix(k, "net") || !hotplugKeyRe.MatchString(k) {
			continue
		}
		bridge := netBridge(vm.conf[k])
		_, pending := s.sdn.config.vnets[bridge]
		_, running := s.sdn.running.vnets[bridge]
		if pending && !running {
			return errf("bridge '%s' does not exist", bridge)
		}
	}
	return nil
}

// netBridge is the bridge of a netN value.
func netBridge(v string) string {
	for _, part := range strings.Split(v, ",") {
		if b, ok := strings.CutPrefix(part, "bridge="); ok {
			return b
		}
	}
	return ""
}

// SDNObject returns a zone, VNet or subnet ("zones", "vnets", "subnets") as the SDN files hold it,
// or with running as the applied configuration holds it.
func (s *Simulator) SDNObject(kind, id string, running bool) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.sdn.config
	if running {
		cfg = s.sdn.running
	}
	sec, ok := cfg.kind(kind)[id]
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, v := range sec {
		out[k] = v
	}
	return out, true
}

// IPAMEntry is one address in the simulated PVE IPAM.
type IPAMEntry struct {
	Zone, VNet, IP, MAC string
	VMID                int
	Gateway             bool
}

// IPAM lists the addresses of PVE's IPAM.
func (s *Simulator) IPAM() []IPAMEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []IPAMEntry
	for _, e := range s.sdn.ipam {
		out = append(out, IPAMEntry{Zone: e.zone, VNet: e.vnet, IP: e.ip.String(), MAC: e.mac, VMID: e.vmid, Gateway: e.gateway})
	}
	return out
}
