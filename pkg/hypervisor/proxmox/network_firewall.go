package proxmox

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// fwGroupRow is one row of GET /cluster/firewall/groups.
type fwGroupRow struct {
	Group   string `json:"group"`
	Comment string `json:"comment"`
}

// fwRule is a firewall rule as PVE lists it.
type fwRule struct {
	Pos     int    `json:"pos"`
	Type    string `json:"type"`
	Action  string `json:"action"`
	Source  string `json:"source"`
	Dest    string `json:"dest"`
	Proto   string `json:"proto"`
	DPort   string `json:"dport"`
	Iface   string `json:"iface"`
	Enable  number `json:"enable"`
	Comment string `json:"comment"`
}

func (r fwRule) key() string {
	return strings.Join([]string{r.Type, r.Action, r.Source, r.Dest, r.Proto, r.DPort, r.Iface,
		fmt.Sprint(int(r.Enable)), r.Comment}, "|")
}

// readGroup returns the network's security group, nil when absent; ErrNotOwned when one of its
// name lacks our mark.
func (p *Provider) readGroup(ctx context.Context, op, id string) (*fwGroupRow, error) {
	var groups []fwGroupRow
	if err := p.get(ctx, op, "/cluster/firewall/groups", &groups); err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.Group != groupName(id) {
			continue
		}
		if !p.marked(g.Comment) {
			return nil, hypervisor.Errorf(hypervisor.ErrNotOwned, op, "firewall security group %s (comment %q) lacks the mark %s %s", g.Group, g.Comment, markPrefix, p.ownerTag)
		}
		return &g, nil
	}
	return nil, nil
}

// groupRules renders the network's rules as PVE rules: "in" matches the peer as source, "out"
// as destination.
func groupRules(n hypervisor.VirtualNetwork) []fwRule {
	var out []fwRule
	for _, r := range n.Rules {
		fr := fwRule{Type: strings.ToLower(r.Direction), Action: strings.ToUpper(r.Action), Proto: r.Protocol,
			DPort: r.Ports, Enable: 1, Comment: r.Comment}
		if fr.Type == "in" {
			fr.Source = r.Peer
		} else {
			fr.Dest = r.Peer
		}
		out = append(out, fr)
	}
	return out
}

func (r fwRule) params() map[string]any {
	out := map[string]any{"type": r.Type, "action": r.Action, "enable": int(r.Enable)}
	for k, v := range map[string]string{"source": r.Source, "dest": r.Dest, "proto": r.Proto, "dport": r.DPort, "iface": r.Iface, "comment": r.Comment} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// ensureGroup creates the group and replaces its rules when they differ from n's, in order.
func (p *Provider) ensureGroup(ctx context.Context, op string, n hypervisor.VirtualNetwork, have *fwGroupRow) error {
	name := groupName(n.ID)
	path := "/cluster/firewall/groups/" + name
	var current []fwRule
	if have == nil {
		if err := p.post(ctx, op, "/cluster/firewall/groups", map[string]any{"group": name, "comment": p.mark(n.Title)}, nil); err != nil {
			return err
		}
	} else if err := p.get(ctx, op, path, &current); err != nil {
		return err
	}
	want := groupRules(n)
	if sameRules(current, want) {
		return nil
	}
	// Remove from the bottom so positions stay valid, then insert from the last rule: PVE puts
	// a new rule at the top.
	for i := len(current) - 1; i >= 0; i-- {
		if err := p.delete(ctx, op, fmt.Sprintf("%s/%d", path, i), nil); err != nil {
			return err
		}
	}
	for i := len(want) - 1; i >= 0; i-- {
		if err := p.post(ctx, op, path, want[i].params(), nil); err != nil {
			return err
		}
	}
	return nil
}

func sameRules(have, want []fwRule) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		if have[i].key() != want[i].key() {
			return false
		}
	}
	return true
}

// deleteGroup empties and removes the network's security group (PVE removes only empty groups).
func (p *Provider) deleteGroup(ctx context.Context, op, id string) error {
	path := "/cluster/firewall/groups/" + groupName(id)
	var rules []fwRule
	if err := p.get(ctx, op, path, &rules); err != nil {
		return err
	}
	for i := len(rules) - 1; i >= 0; i-- {
		if err := p.delete(ctx, op, fmt.Sprintf("%s/%d", path, i), nil); err != nil {
			return err
		}
	}
	return p.delete(ctx, op, path, nil)
}

// bindingComment marks the VM firewall rules that bind a NIC to its network's group.
const bindingComment = "hyperfleet network policy"

// bindSecurityGroups binds each NIC with a policy group to it on the VM's firewall (a rule of
// type group on the NIC's interface) and turns the VM's firewall on with incoming traffic
// dropped unless a rule accepts it. Bindings already there are kept, so a retried Configure adds
// none twice; our bindings of a NIC to another group go. It costs one read, one write per missing
// binding and one options write, and nothing for a VM without policies.
func (p *Provider) bindSecurityGroups(ctx context.Context, op string, ref hypervisor.VMRef, nics []hypervisor.NIC) error {
	want := map[string]string{}
	for i, n := range nics {
		if n.Policy != nil && n.Policy.SecurityGroup != "" {
			want[fmt.Sprintf("net%d", i)] = n.Policy.SecurityGroup
		}
	}
	if len(want) == 0 {
		return nil
	}
	path := vmPath(ref, "/firewall/rules")
	var rules []fwRule
	if err := p.get(ctx, op, path, &rules); err != nil {
		return err
	}
	have := map[string]bool{}
	for i := len(rules) - 1; i >= 0; i-- {
		r := rules[i]
		if r.Type != "group" || r.Comment != bindingComment {
			continue
		}
		if want[r.Iface] == r.Action && r.Enable == 1 && !have[r.Iface] {
			have[r.Iface] = true
			continue
		}
		if err := p.delete(ctx, op, fmt.Sprintf("%s/%d", path, r.Pos), nil); err != nil {
			return err
		}
	}
	for _, iface := range sortedKeys(want) {
		if have[iface] {
			continue
		}
		rule := fwRule{Type: "group", Action: want[iface], Iface: iface, Enable: 1, Comment: bindingComment}
		if err := p.post(ctx, op, path, rule.params(), nil); err != nil {
			return err
		}
	}
	return p.put(ctx, op, vmPath(ref, "/firewall/options"),
		map[string]any{"enable": 1, "policy_in": "DROP", "policy_out": "ACCEPT"}, nil)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
