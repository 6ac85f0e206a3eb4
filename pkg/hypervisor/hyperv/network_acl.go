package hyperv

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A network's rules become extended port ACLs on each VM network adapter on it
// (Add-VMNetworkAdapterExtendedAcl). Hyper-V applies the entry of the largest weight that matches
// a packet, so the rules get weights in descending order and the first matching rule decides, as
// on Proxmox. Below them, when there are rules, come the defaults of Proxmox's policy_in=DROP and
// policy_out=ACCEPT: incoming DHCP replies and ICMPv6 (neighbour discovery) are allowed, outgoing
// TCP and UDP are allowed statefully so their replies come back, and a last Deny Inbound drops
// whatever else comes in. Replies to the guest's own ICMPv4 (ping) are dropped unless a rule
// allows ICMP in: Hyper-V keeps state for TCP and UDP only.
//
// A rule maps as: direction in → Inbound, out → Outbound; ACCEPT → Allow, DROP → Deny; REJECT
// has no equivalent (a gap); protocol tcp → TCP, udp → UDP, icmp → protocol number 1; the ports
// are the destination's (LocalPort for an inbound rule, RemotePort for an outbound one), each
// item of the list an entry of its own ("8000:8080" as "8000-8080"); the peer is RemoteIPAddress.
// An Allow entry for TCP or UDP is stateful.

// aclInput is one extended ACL entry of Set-HFPortPolicy.
type aclInput struct {
	Action          string
	Direction       string
	RemoteIPAddress string `json:",omitempty"`
	LocalPort       string `json:",omitempty"`
	RemotePort      string `json:",omitempty"`
	Protocol        string `json:",omitempty"`
	Weight          int
	Stateful        bool `json:",omitempty"`
}

// line is how an entry travels to Set-HFPortPolicy, one line per entry so a whole list fits a
// command line: Action|Direction|RemoteIPAddress|LocalPort|RemotePort|Protocol|Weight|Stateful.
func (a aclInput) line() string {
	stateful := "0"
	if a.Stateful {
		stateful = "1"
	}
	return strings.Join([]string{a.Action, a.Direction, a.RemoteIPAddress, a.LocalPort, a.RemotePort, a.Protocol, strconv.Itoa(a.Weight), stateful}, "|")
}

// portPolicyInput is Set-HFPortPolicy's argument: the adapter by its MAC, its ACL entries (as
// lines) and its bandwidth cap in bits per second (0 for none).
type portPolicyInput struct {
	ID               string `json:"Id"`
	Expect           expectation
	MacAddress       string
	Acls             []string
	MaximumBandwidth int64
}

const (
	// maxACLs bounds one adapter's entries, defaults included, so Set-HFPortPolicy's input fits
	// a command line (TestPortPolicyFitsACommandLine).
	maxACLs = 24
	// firstRuleWeight is the weight of the last rule's entry; the defaults sit below it.
	firstRuleWeight = 100
)

// defaultACLs are the entries below the rules, in descending weight.
var defaultACLs = []aclInput{
	{Action: "Allow", Direction: "Inbound", LocalPort: "68", RemotePort: "67", Protocol: "UDP", Weight: 5},
	{Action: "Allow", Direction: "Inbound", Protocol: "58", Weight: 4},
	{Action: "Allow", Direction: "Outbound", Protocol: "TCP", Weight: 3, Stateful: true},
	{Action: "Allow", Direction: "Outbound", Protocol: "UDP", Weight: 2, Stateful: true},
	{Action: "Deny", Direction: "Inbound", Weight: 1},
}

// aclEntries maps one rule to its entries, without weights, or says why it cannot.
func aclEntries(r hypervisor.FirewallRule) ([]aclInput, error) {
	var e aclInput
	switch strings.ToLower(r.Direction) {
	case "in":
		e.Direction = "Inbound"
	case "out":
		e.Direction = "Outbound"
	default:
		return nil, fmt.Errorf("direction %q is neither in nor out", r.Direction)
	}
	switch strings.ToUpper(r.Action) {
	case "ACCEPT":
		e.Action = "Allow"
	case "DROP":
		e.Action = "Deny"
	case "REJECT":
		return nil, fmt.Errorf("Hyper-V ACLs allow or deny; REJECT is not available (use DROP)")
	default:
		return nil, fmt.Errorf("action %q is not ACCEPT or DROP", r.Action)
	}
	switch strings.ToLower(r.Protocol) {
	case "":
	case "tcp":
		e.Protocol = "TCP"
	case "udp":
		e.Protocol = "UDP"
	case "icmp":
		e.Protocol = "1"
	default:
		return nil, fmt.Errorf("protocol %q is not tcp, udp or icmp", r.Protocol)
	}
	e.Stateful = e.Action == "Allow" && (e.Protocol == "TCP" || e.Protocol == "UDP")
	if r.Peer != "" {
		peer, err := parsePeer(r.Peer)
		if err != nil {
			return nil, err
		}
		e.RemoteIPAddress = peer
	}
	if strings.TrimSpace(r.Ports) == "" {
		return []aclInput{e}, nil
	}
	if e.Protocol != "TCP" && e.Protocol != "UDP" {
		return nil, fmt.Errorf("ports %q need protocol tcp or udp", r.Ports)
	}
	var out []aclInput
	for _, item := range strings.Split(r.Ports, ",") {
		port, err := portItem(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		x := e
		if e.Direction == "Inbound" {
			x.LocalPort = port
		} else {
			x.RemotePort = port
		}
		out = append(out, x)
	}
	return out, nil
}

func parsePeer(s string) (string, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked().String(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.String(), nil
	}
	return "", fmt.Errorf("peer %q is not an address or prefix", s)
}

// portItem renders "22" or "8000:8080" as Hyper-V writes ports ("22", "8000-8080").
func portItem(s string) (string, error) {
	lo, hi, isRange := strings.Cut(s, ":")
	a, err1 := strconv.Atoi(lo)
	b := a
	var err2 error
	if isRange {
		b, err2 = strconv.Atoi(hi)
	}
	if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return "", fmt.Errorf("port %q is not a port or an ordered range between 1 and 65535", s)
	}
	if isRange {
		return fmt.Sprintf("%d-%d", a, b), nil
	}
	return strconv.Itoa(a), nil
}

// portACLs is an adapter's whole list for rules: the rules' entries, first rule heaviest, then
// the defaults; none without rules (no filtering).
func portACLs(rules []hypervisor.FirewallRule) ([]aclInput, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var entries []aclInput
	for i, r := range rules {
		e, err := aclEntries(r)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		entries = append(entries, e...)
	}
	if n := len(entries) + len(defaultACLs); n > maxACLs {
		return nil, fmt.Errorf("the rules make %d port ACL entries with HyperFleet's %d defaults (a port list counts once per item); HyperFleet gives a Hyper-V adapter at most %d", n, len(defaultACLs), maxACLs)
	}
	for i := range entries {
		entries[i].Weight = firstRuleWeight + len(entries) - 1 - i
	}
	return append(entries, defaultACLs...), nil
}

// policyInputs checks the NICs' policies and renders a Set-HFPortPolicy call for each NIC that
// has one; a NIC on a plain bridge (no policy) keeps what its adapter has.
func policyInputs(op string, nics []hypervisor.NIC) ([]portPolicyInput, error) {
	var out []portPolicyInput
	for i, n := range nics {
		if n.Policy == nil {
			continue
		}
		if n.Policy.SecurityGroup != "" {
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %d: security group %q: Hyper-V has no security groups; the network's rules are applied to each adapter", i, n.Policy.SecurityGroup)
		}
		if n.Policy.RateMbps < 0 {
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %d: bandwidth %d Mbit/s is negative", i, n.Policy.RateMbps)
		}
		acls, err := portACLs(n.Policy.Rules)
		if err != nil {
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %d: %v", i, err)
		}
		lines := make([]string, len(acls))
		for i, a := range acls {
			lines[i] = a.line()
		}
		out = append(out, portPolicyInput{MacAddress: strings.ToUpper(strings.ReplaceAll(n.MAC, ":", "")), Acls: lines,
			MaximumBandwidth: int64(n.Policy.RateMbps) * 1_000_000})
	}
	return out, nil
}

// applyPolicies gives each adapter with a policy its ACLs and bandwidth cap, one call per adapter.
func applyPolicies(ctx context.Context, op string, h *host, id string, expect expectation, policies []portPolicyInput) error {
	for _, pol := range policies {
		pol.ID, pol.Expect = id, expect
		if err := h.call(ctx, op, fnSetPortPolicy, pol, nil); err != nil {
			return err
		}
	}
	return nil
}
