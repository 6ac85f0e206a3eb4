package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// PVE's firewall: cluster-wide security groups (cluster.fw's [group x] sections) holding ordered
// rules, and each VM's own rules and options (/etc/pve/firewall/<vmid>.fw). A new rule goes to the
// top of its list, as PVE's create_rule unshifts it; a rule without enable=1 is disabled.

type fwRule map[string]string

type fwGroup struct {
	comment string
	rules   []fwRule
}

type vmFirewall struct {
	rules   []fwRule
	options map[string]string
}

type firewallState struct {
	groups map[string]*fwGroup
	vms    map[int]*vmFirewall
}

func newFirewallState() *firewallState {
	return &firewallState{groups: map[string]*fwGroup{}, vms: map[int]*vmFirewall{}}
}

var fwRuleKeys = []string{"type", "action", "macro", "source", "dest", "proto", "dport", "sport", "iface", "log", "icmp-type", "enable", "comment"}

func fwDigest(v any) string {
	sum := sha1.Sum([]byte(fmt.Sprintf("%v", v)))
	return hex.EncodeToString(sum[:])
}

func fwRulesJSON(rules []fwRule) []map[string]any {
	out := []map[string]any{}
	for i, r := range rules {
		out = append(out, fwRuleJSON(i, r))
	}
	return out
}

func fwRuleJSON(pos int, r fwRule) map[string]any {
	e := map[string]any{"pos": pos}
	for k, v := range r {
		if k == "enable" {
			e[k] = atoiOr(v, 0)
			continue
		}
		e[k] = v
	}
	if r["source"] != "" || r["dest"] != "" {
		e["ipversion"] = 4
		for _, a := range []string{r["source"], r["dest"]} {
			if strings.Contains(a, ":") {
				e["ipversion"] = 6
			}
		}
	}
	return e
}

var (
	fwActionRe   = regexp.MustCompile(`^(ACCEPT|DROP|REJECT)$`)
	fwProtosPort = map[string]bool{"tcp": true, "udp": true, "6": true, "17": true, "dccp": true, "sctp": true, "udplite": true}
	fwPortRe     = regexp.MustCompile(`^\d+(:\d+)?$`)
	fwIfaceRe    = regexp.MustCompile(`^net\d+$`)
)

// checkFWAddr is parse_address_list for the simple cases: an IP, a CIDR, a range, a list of them,
// an ipset (+name) or an alias.
func checkFWAddr(v string) string {
	if strings.HasPrefix(v, "+") || regexp.MustCompile(`^(?i)[a-z][a-z0-9_-]*$`).MatchString(v) {
		return ""
	}
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if isRange {
			if _, err := netip.ParseAddr(lo); err != nil {
				return "invalid IP address: " + part
			}
			if _, err := netip.ParseAddr(hi); err != nil {
				return "invalid IP address: " + part
			}
			continue
		}
		if _, err := netip.ParsePrefix(part); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(part); err != nil {
			return "invalid IP address: " + part
		}
	}
	return ""
}

// fwRuleFrom copies and verifies a rule's parameters as PVE's copy_rule_data and verify_rule do.
func (s *Simulator) fwRuleFrom(p params, base fwRule, inGroup bool) (fwRule, *apiError) {
	r := fwRule{}
	for k, v := range base {
		r[k] = v
	}
	for _, k := range splitList(p.get("delete")) {
		delete(r, k)
	}
	for _, k := range fwRuleKeys {
		if v, ok := p.str(k); ok {
			if v == "" {
				delete(r, k)
			} else {
				r[k] = v
			}
		}
	}
	if base == nil && r["enable"] == "" {
		r["enable"] = "0"
	}
	errs := map[string]string{}
	switch typ, action := r["type"], r["action"]; typ {
	case "group":
		if inGroup {
			errs["type"] = "security groups not allowed"
		} else if s.fw.groups[action] == nil {
			errs["action"] = fmt.Sprintf("no such security group '%s'", action)
		}
	default:
		if r["macro"] == "" && !fwActionRe.MatchString(action) {
			errs["action"] = fmt.Sprintf("unknown action '%s'", action)
		}
	}
	if d := r["dport"]; d != "" {
		for _, part := range strings.Split(d, ",") {
			if !fwPortRe.MatchString(part) {
				errs["dport"] = fmt.Sprintf("invalid port '%s'", part)
			}
		}
		switch proto := r["proto"]; {
		case proto == "":
			errs["proto"] = "missing property - 'dport' requires this property"
		case !fwProtosPort[proto]:
			errs["dport"] = fmt.Sprintf("protocol '%s' does not support ports", proto)
		}
	}
	for _, k := range []string{"source", "dest"} {
		if v := r[k]; v != "" {
			if msg := checkFWAddr(v); msg != "" {
				errs[k] = msg
			}
		}
	}
	if i := r["iface"]; i != "" && !inGroup && !fwIfaceRe.MatchString(i) {
		errs["iface"] = fmt.Sprintf("invalid interface name '%s'", i)
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	return r, nil
}

// --- cluster security groups ---------------------------------------------------

func (s *Simulator) getFWGroups(*request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.fw.groups))
	for n := range s.fw.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	digest := fwDigest(s.fw.groups)
	out := []map[string]any{}
	for _, n := range names {
		e := map[string]any{"group": n, "digest": digest}
		if c := s.fw.groups[n].comment; c != "" {
			e["comment"] = c
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Simulator) postFWGroup(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := rq.p.get("group")
	comment, hasComment := rq.p.str("comment")
	if old := rq.p.get("rename"); old != "" {
		g := s.fw.groups[old]
		if g == nil {
			return nil, paramErr(map[string]string{"group": fmt.Sprintf("Security group '%s' does not exist", old)})
		}
		if s.fw.groups[name] != nil && name != old {
			return nil, paramErr(map[string]string{"group": fmt.Sprintf("Security group '%s' does already exist", name)})
		}
		delete(s.fw.groups, old)
		if hasComment {
			g.comment = comment
		}
		s.fw.groups[name] = g
		return nil, nil
	}
	if s.fw.groups[name] != nil {
		return nil, paramErr(map[string]string{"group": fmt.Sprintf("Security group '%s' already exists", name)})
	}
	s.fw.groups[name] = &fwGroup{comment: comment}
	return nil, nil
}

func (s *Simulator) fwGroupOf(rq *request) (*fwGroup, *apiError) {
	g := s.fw.groups[rq.p.get("group")]
	if g == nil {
		return nil, errf("no such security group '%s'", rq.p.get("group"))
	}
	return g, nil
}

func (s *Simulator) deleteFWGroup(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := rq.p.get("group")
	g := s.fw.groups[name]
	if g == nil {
		return nil, nil
	}
	if len(g.rules) > 0 {
		return nil, errf("Security group '%s' is not empty", name)
	}
	delete(s.fw.groups, name)
	return nil, nil
}

// rulePos reads {pos} and checks it names a rule of rules.
func rulePos(rq *request, rules []fwRule) (int, *apiError) {
	pos, err := strconv.Atoi(rq.p.get("pos"))
	if err != nil || pos < 0 || pos >= len(rules) {
		return 0, errf("no rule at position %s", rq.p.get("pos"))
	}
	return pos, nil
}

// ruleList finds the rules a request names (a security group's, a VM's) and whether they are a
// group's, whose rules may not name another group.
type ruleList func(s *Simulator, rq *request) (*[]fwRule, bool, *apiError)

func groupRules(s *Simulator, rq *request) (*[]fwRule, bool, *apiError) {
	g, err := s.fwGroupOf(rq)
	if err != nil {
		return nil, true, err
	}
	return &g.rules, true, nil
}

func vmRules(s *Simulator, rq *request) (*[]fwRule, bool, *apiError) {
	f, err := s.vmFirewall(rq)
	if err != nil {
		return nil, false, err
	}
	return &f.rules, false, nil
}

// The handlers of a rule list: PVE serves a security group's and a VM's rules alike.

func (s *Simulator) listRules(of ruleList) handlerFunc {
	return func(rq *request) (any, *apiError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rules, _, err := of(s, rq)
		if err != nil {
			return nil, err
		}
		return fwRulesJSON(*rules), nil
	}
}

// addRule puts a new rule first, as PVE does without pos.
func (s *Simulator) addRule(of ruleList) handlerFunc {
	return func(rq *request) (any, *apiError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rules, inGroup, err := of(s, rq)
		if err != nil {
			return nil, err
		}
		r, err := s.fwRuleFrom(rq.p, nil, inGroup)
		if err != nil {
			return nil, err
		}
		*rules = append([]fwRule{r}, *rules...)
		return nil, nil
	}
}

func (s *Simulator) getRule(of ruleList) handlerFunc {
	return func(rq *request) (any, *apiError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rules, _, err := of(s, rq)
		if err != nil {
			return nil, err
		}
		pos, err := rulePos(rq, *rules)
		if err != nil {
			return nil, err
		}
		return fwRuleJSON(pos, (*rules)[pos]), nil
	}
}

func (s *Simulator) putRule(of ruleList) handlerFunc {
	return func(rq *request) (any, *apiError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rules, inGroup, err := of(s, rq)
		if err != nil {
			return nil, err
		}
		*rules, err = s.updateRule(rq, *rules, inGroup)
		return nil, err
	}
}

func (s *Simulator) deleteRule(of ruleList) handlerFunc {
	return func(rq *request) (any, *apiError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rules, _, err := of(s, rq)
		if err != nil {
			return nil, err
		}
		pos, err := rulePos(rq, *rules)
		if err != nil {
			return nil, err
		}
		*rules = append((*rules)[:pos:pos], (*rules)[pos+1:]...)
		return nil, nil
	}
}

// updateRule is update_rule: with moveto the rule moves, otherwise it changes in place.
func (s *Simulator) updateRule(rq *request, rules []fwRule, inGroup bool) ([]fwRule, *apiError) {
	pos, err := rulePos(rq, rules)
	if err != nil {
		return rules, err
	}
	if mv, ok := rq.p.str("moveto"); ok {
		to := atoiOr(mv, pos)
		r := rules[pos]
		rest := append(rules[:pos:pos], rules[pos+1:]...)
		if to > len(rest) {
			to = len(rest)
		}
		return append(rest[:to:to], append([]fwRule{r}, rest[to:]...)...), nil
	}
	r, err := s.fwRuleFrom(rq.p, rules[pos], inGroup)
	if err != nil {
		return rules, err
	}
	rules[pos] = r
	return rules, nil
}

// --- VM firewall -----------------------------------------------------------------

func (s *Simulator) vmFirewall(rq *request) (*vmFirewall, *apiError) {
	vmid := rq.vmid()
	if _, err := s.vmOnNode(rq.p.get("node"), vmid); err != nil {
		return nil, err
	}
	f := s.fw.vms[vmid]
	if f == nil {
		f = &vmFirewall{options: map[string]string{}}
		s.fw.vms[vmid] = f
	}
	return f, nil
}

var vmFWOptionKeys = []string{"enable", "dhcp", "ipfilter", "log_level_in", "log_level_out", "macfilter", "ndp", "policy_in", "policy_out", "radv"}

var vmFWBoolOptions = map[string]bool{"enable": true, "dhcp": true, "ipfilter": true, "macfilter": true, "ndp": true, "radv": true}

func (s *Simulator) getVMFWOptions(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.vmFirewall(rq)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"digest": fwDigest(f.options)}
	for k, v := range f.options {
		if vmFWBoolOptions[k] {
			out[k] = atoiOr(v, 0)
			continue
		}
		out[k] = v
	}
	return out, nil
}

func (s *Simulator) putVMFWOptions(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.vmFirewall(rq)
	if err != nil {
		return nil, err
	}
	if d := rq.p.get("digest"); d != "" && d != fwDigest(f.options) {
		return nil, errf("detected modified configuration - file changed by other user? Try again.")
	}
	for _, k := range splitList(rq.p.get("delete")) {
		delete(f.options, k)
	}
	for _, k := range vmFWOptionKeys {
		if v, ok := rq.p.str(k); ok {
			f.options[k] = v
		}
	}
	return nil, nil
}

// VMFirewall is a VM's firewall as tests see it: its rules in order and its options.
type VMFirewall struct {
	Rules   []map[string]string
	Options map[string]string
}

// FirewallOf returns vmid's firewall configuration.
func (s *Simulator) FirewallOf(vmid int) VMFirewall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := VMFirewall{Options: map[string]string{}}
	if f := s.fw.vms[vmid]; f != nil {
		for _, r := range f.rules {
			cp := map[string]string{}
			for k, v := range r {
				cp[k] = v
			}
			out.Rules = append(out.Rules, cp)
		}
		for k, v := range f.options {
			out.Options[k] = v
		}
	}
	return out
}

// FirewallGroup returns a cluster security group's comment and rules in order.
func (s *Simulator) FirewallGroup(name string) (string, []map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.fw.groups[name]
	if g == nil {
		return "", nil, false
	}
	var rules []map[string]string
	for _, r := range g.rules {
		cp := map[string]string{}
		for k, v := range r {
			cp[k] = v
		}
		rules = append(rules, cp)
	}
	return g.comment, rules, true
}
