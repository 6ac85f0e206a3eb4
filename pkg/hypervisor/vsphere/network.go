package vsphere

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A VirtualNetwork is a distributed port group named hf-<ID> on a distributed switch. vSphere has
// no overlay, firewall, DHCP server or NAT of its own (NSX brings them), so those features are gaps;
// an Isolated network is a port group without uplinks, a VLAN network one whose ports vSphere tags.

const (
	// portGroupPrefix starts the name of every port group HyperFleet makes.
	portGroupPrefix = "hf-"
	// defaultMTU is a distributed switch's MTU when it reports none.
	defaultMTU = 1500
	// portGroupPorts is a new port group's port count; it grows as VMs connect (autoExpand).
	portGroupPorts = 8
)

var _ hypervisor.Networker = (*Provider)(nil)

// networkID is what VirtualNetwork.ID may be: the port group's name must stay short and plain.
var networkID = regexp.MustCompile(`^[a-z][a-z0-9]{0,6}$`)

// noDHCP is the reason vSphere gives for every address service a network asks of it.
const noDHCP = "vSphere has no DHCP server or NAT: HyperFleet VMs get their addresses through cloud-init only"

// NetworkGaps implements hypervisor.Networker.
func (p *Provider) NetworkGaps(n hypervisor.VirtualNetwork) []hypervisor.NetworkGap {
	var gaps []hypervisor.NetworkGap
	switch n.Kind {
	case "", hypervisor.NetworkIsolated, hypervisor.NetworkVLAN:
	case hypervisor.NetworkVXLAN:
		gaps = append(gaps, hypervisor.NetworkGap{Field: "spec.type", Reason: "vSphere has no overlay without NSX"})
	default:
		gaps = append(gaps, hypervisor.NetworkGap{Field: "spec.type", Reason: fmt.Sprintf("vSphere has no network of type %q", n.Kind)})
	}
	for i, s := range n.Subnets {
		if s.DHCPStart.IsValid() || s.DHCPEnd.IsValid() {
			gaps = append(gaps, hypervisor.NetworkGap{Field: fmt.Sprintf("spec.subnets[%d].dhcp", i), Reason: noDHCP})
		}
		if s.SNAT {
			gaps = append(gaps, hypervisor.NetworkGap{Field: fmt.Sprintf("spec.subnets[%d].snat", i), Reason: noDHCP})
		}
	}
	if len(n.Rules) > 0 {
		gaps = append(gaps, hypervisor.NetworkGap{Field: "spec.securityPolicy", Reason: "vSphere has no distributed firewall without NSX"})
	}
	return gaps
}

// EnsureNetwork implements hypervisor.Networker: the port group hf-<ID> on the switch n.Uplink
// names (the only distributed switch when empty; for an Isolated network, which has no uplink,
// the first by name that spans the compute cluster when there are several), with the VLAN, and
// for an Isolated network no uplink at all, so its traffic never leaves the host. The network's
// MTU is its switch's: vSphere sets MTU per switch, for every port group on it, so a different
// MTU is refused. One RetrieveProperties call when nothing changes.
func (p *Provider) EnsureNetwork(ctx context.Context, n hypervisor.VirtualNetwork) (hypervisor.NetworkRealization, error) {
	if !networkID.MatchString(n.ID) {
		return hypervisor.NetworkRealization{}, refused(hypervisor.ErrInvalid, "EnsureNetwork", "network ID %q is not 1 to 7 lower-case letters and digits starting with a letter", n.ID)
	}
	if gaps := p.NetworkGaps(n); len(gaps) > 0 {
		var reasons []string
		for _, g := range gaps {
			reasons = append(reasons, g.Field+": "+g.Reason)
		}
		return hypervisor.NetworkRealization{}, refused(hypervisor.ErrUnsupported, "EnsureNetwork", "%s", strings.Join(reasons, "; "))
	}
	if n.Kind == hypervisor.NetworkVLAN && (n.VLAN < 1 || n.VLAN > 4094) {
		return hypervisor.NetworkRealization{}, refused(hypervisor.ErrInvalid, "EnsureNetwork", "VLAN %d is not between 1 and 4094", n.VLAN)
	}
	name := portGroupPrefix + n.ID
	err := p.do(ctx, "EnsureNetwork", func(ctx context.Context, cn *conn) error {
		inv, err := readNetworks(ctx, cn)
		if err != nil {
			return err
		}
		pg := inv.portGroup(name)
		var sw *mo.DistributedVirtualSwitch
		if pg != nil {
			if !p.ownsPortGroup(pg) {
				return refused(hypervisor.ErrNotOwned, "EnsureNetwork", "port group %s does not carry this HypervisorCluster's mark", name)
			}
			if sw = inv.switchOf(pg); sw == nil {
				return refused(hypervisor.ErrTransient, "EnsureNetwork", "the switch of port group %s is not readable", name)
			}
			if n.Uplink != "" && n.Uplink != sw.Name {
				return refused(hypervisor.ErrInvalid, "EnsureNetwork", "port group %s is on switch %s, not %s: a port group cannot move between switches", name, sw.Name, n.Uplink)
			}
		} else if sw, err = p.chooseSwitch(ctx, cn, inv, n); err != nil {
			return err
		}
		if mtu := switchMTU(sw); n.MTU != 0 && n.MTU != mtu {
			return refused(hypervisor.ErrUnsupported, "EnsureNetwork", "switch %s has MTU %d: vSphere sets the MTU per distributed switch, for every port group on it, so HyperFleet does not change it for one network", sw.Name, mtu)
		}
		description := p.portGroupDescription(n)
		if pg == nil {
			spec := types.DVPortgroupConfigSpec{Name: name, Description: description, NumPorts: portGroupPorts, AutoExpand: types.NewBool(true),
				Type: string(types.DistributedVirtualPortgroupPortgroupTypeEarlyBinding), DefaultPortConfig: portSetting(nil, n)}
			t, err := object.NewDistributedVirtualSwitch(cn.c, sw.Reference()).AddPortgroup(ctx, []types.DVPortgroupConfigSpec{spec})
			if err != nil {
				return err
			}
			return t.Wait(ctx)
		}
		setting := portSetting(portSettingOf(pg), n)
		if pg.Config.Description == description && samePortSetting(portSettingOf(pg), setting) {
			return nil
		}
		return reconfigurePortGroup(ctx, cn, pg, description, setting)
	})
	if err != nil {
		return hypervisor.NetworkRealization{}, err
	}
	return hypervisor.NetworkRealization{Bridge: name}, nil
}

// DeleteNetwork implements hypervisor.Networker: the port group goes. vCenter refuses while VMs
// use it: ErrBusy with vCenter's words.
func (p *Provider) DeleteNetwork(ctx context.Context, id string, _ hypervisor.Ownership) error {
	if !networkID.MatchString(id) {
		return refused(hypervisor.ErrInvalid, "DeleteNetwork", "network ID %q is not 1 to 7 lower-case letters and digits starting with a letter", id)
	}
	name := portGroupPrefix + id
	return p.do(ctx, "DeleteNetwork", func(ctx context.Context, cn *conn) error {
		inv, err := readNetworks(ctx, cn)
		if err != nil {
			return err
		}
		pg := inv.portGroup(name)
		if pg == nil {
			return nil
		}
		if !p.ownsPortGroup(pg) {
			return refused(hypervisor.ErrNotOwned, "DeleteNetwork", "port group %s does not carry this HypervisorCluster's mark", name)
		}
		t, err := object.NewDistributedVirtualPortgroup(cn.c, pg.Reference()).Destroy(ctx)
		if err == nil {
			err = t.Wait(ctx)
		}
		switch faultOf(err).(type) {
		case nil:
			return err
		case types.ResourceInUse, *types.ResourceInUse:
			return refused(hypervisor.ErrBusy, "DeleteNetwork", "port group %s is in use by VMs; vCenter: %v", name, err)
		case types.ManagedObjectNotFound, *types.ManagedObjectNotFound:
			return nil
		}
		return err
	})
}

// ReserveAddress implements hypervisor.Networker: vSphere has no IPAM, so the address reaches the
// guest through cloud-init only.
func (p *Provider) ReserveAddress(context.Context, string, hypervisor.Ownership, netip.Addr, string) error {
	return nil
}

// ReleaseAddress implements hypervisor.Networker: there is nothing to release without an IPAM.
func (p *Provider) ReleaseAddress(context.Context, string, hypervisor.Ownership, netip.Addr, string) error {
	return nil
}

// networks are the datacenter's distributed switches and port groups, read in one call.
type networks struct {
	switches   []mo.DistributedVirtualSwitch
	portGroups []mo.DistributedVirtualPortgroup
}

// networkProps are the properties read of switches and port groups alike.
var networkProps = []string{"name", "config", "summary"}

func readNetworks(ctx context.Context, cn *conn) (networks, error) {
	v, err := cn.view(ctx, "DistributedVirtualSwitch", "DistributedVirtualPortgroup")
	if err != nil {
		return networks{}, err
	}
	var content []types.ObjectContent
	if err := v.Retrieve(ctx, []string{"DistributedVirtualSwitch", "DistributedVirtualPortgroup"}, networkProps, &content); err != nil {
		return networks{}, err
	}
	var switches, portGroups []types.ObjectContent
	for _, oc := range content {
		if oc.Obj.Type == "DistributedVirtualPortgroup" {
			portGroups = append(portGroups, oc)
		} else {
			switches = append(switches, oc)
		}
	}
	var out networks
	if err := mo.LoadObjectContent(switches, &out.switches); err != nil {
		return networks{}, err
	}
	if err := mo.LoadObjectContent(portGroups, &out.portGroups); err != nil {
		return networks{}, err
	}
	sort.Slice(out.switches, func(i, j int) bool { return out.switches[i].Name < out.switches[j].Name })
	return out, nil
}

func (inv networks) portGroup(name string) *mo.DistributedVirtualPortgroup {
	for i := range inv.portGroups {
		if inv.portGroups[i].Name == name {
			return &inv.portGroups[i]
		}
	}
	return nil
}

func (inv networks) switchOf(pg *mo.DistributedVirtualPortgroup) *mo.DistributedVirtualSwitch {
	for i := range inv.switches {
		if ref := pg.Config.DistributedVirtualSwitch; ref != nil && *ref == inv.switches[i].Reference() {
			return &inv.switches[i]
		}
	}
	return nil
}

// chooseSwitch is the switch a new port group goes on: the one Uplink names; else the only one;
// else, for an Isolated network (it uses no uplink, so any switch the hosts are on will do), the
// first by name whose members are every host of the compute cluster.
func (p *Provider) chooseSwitch(ctx context.Context, cn *conn, inv networks, n hypervisor.VirtualNetwork) (*mo.DistributedVirtualSwitch, error) {
	var names []string
	for i := range inv.switches {
		if inv.switches[i].Name == n.Uplink {
			return &inv.switches[i], nil
		}
		names = append(names, inv.switches[i].Name)
	}
	switch {
	case n.Uplink != "":
		return nil, refused(hypervisor.ErrInvalid, "EnsureNetwork", "no distributed switch %q in the datacenter (switches: %s)", n.Uplink, strings.Join(names, ", "))
	case len(inv.switches) == 0:
		return nil, refused(hypervisor.ErrInvalid, "EnsureNetwork", "the datacenter has no distributed switch: HyperFleet makes its networks as distributed port groups")
	case len(inv.switches) == 1:
		return &inv.switches[0], nil
	case n.Kind == hypervisor.NetworkVLAN:
		return nil, refused(hypervisor.ErrInvalid, "EnsureNetwork", "the datacenter has several distributed switches (%s): name the VLAN's in spec.uplink", strings.Join(names, ", "))
	}
	var cluster mo.ClusterComputeResource
	if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
		return nil, err
	}
	for i := range inv.switches {
		members := inv.switches[i].Summary.HostMember
		if !slices.ContainsFunc(cluster.Host, func(h types.ManagedObjectReference) bool { return !slices.Contains(members, h) }) {
			return &inv.switches[i], nil
		}
	}
	return nil, refused(hypervisor.ErrInvalid, "EnsureNetwork", "none of the distributed switches (%s) spans every host of the compute cluster", strings.Join(names, ", "))
}

func switchMTU(sw *mo.DistributedVirtualSwitch) int {
	if c, ok := sw.Config.(*types.VMwareDVSConfigInfo); ok && c.MaxMtu > 0 {
		return int(c.MaxMtu)
	}
	return defaultMTU
}

// The lines of a port group's description that mark it as HyperFleet's: like a VM's ExtraConfig
// marks, the installation identity and the HypervisorCluster decide ownership.
func (p *Provider) portGroupMarks() []string {
	return []string{keyInstallation + "=" + p.cfg.InstallationID, keyCluster + "=" + p.cfg.Cluster}
}

func (p *Provider) portGroupDescription(n hypervisor.VirtualNetwork) string {
	title := n.Title
	if title == "" {
		title = n.ID
	}
	return strings.Join(append([]string{"HyperFleet network of VMNetwork " + title + ". HyperFleet deletes it when its VMNetwork goes away."},
		p.portGroupMarks()...), "\n")
}

// ownsPortGroup reports whether the port group carries this installation's marks.
func (p *Provider) ownsPortGroup(pg *mo.DistributedVirtualPortgroup) bool {
	lines := strings.Split(pg.Config.Description, "\n")
	for _, m := range p.portGroupMarks() {
		if !slices.Contains(lines, m) {
			return false
		}
	}
	return true
}

func portSettingOf(pg *mo.DistributedVirtualPortgroup) *types.VMwareDVSPortSetting {
	s, _ := pg.Config.DefaultPortConfig.(*types.VMwareDVSPortSetting)
	return s
}

// portSetting is the port group's default port setting as n wants it, keeping what HyperFleet
// does not set (traffic shaping among it) from current.
func portSetting(current *types.VMwareDVSPortSetting, n hypervisor.VirtualNetwork) *types.VMwareDVSPortSetting {
	var s types.VMwareDVSPortSetting
	if current != nil {
		s = *current
	}
	vlan := int32(0)
	if n.Kind == hypervisor.NetworkVLAN {
		vlan = int32(n.VLAN)
	}
	s.Vlan = &types.VmwareDistributedVirtualSwitchVlanIdSpec{VlanId: vlan}
	switch {
	case n.Kind != hypervisor.NetworkVLAN:
		// No active and no standby uplink: the port group's traffic stays on its host.
		var teaming types.VmwareUplinkPortTeamingPolicy
		if s.UplinkTeamingPolicy != nil {
			teaming = *s.UplinkTeamingPolicy
		}
		teaming.UplinkPortOrder = &types.VMwareUplinkPortOrderPolicy{}
		s.UplinkTeamingPolicy = &teaming
	case isolated(&s):
		// Back to the switch's uplinks.
		teaming := *s.UplinkTeamingPolicy
		teaming.UplinkPortOrder = &types.VMwareUplinkPortOrderPolicy{InheritablePolicy: types.InheritablePolicy{Inherited: true}}
		s.UplinkTeamingPolicy = &teaming
	}
	return &s
}

// samePortSetting compares what HyperFleet sets: the VLAN and whether the port group has uplinks.
func samePortSetting(a, b *types.VMwareDVSPortSetting) bool {
	if a == nil || b == nil {
		return a == b
	}
	return vlanOf(a) == vlanOf(b) && isolated(a) == isolated(b)
}

func vlanOf(s *types.VMwareDVSPortSetting) int32 {
	if v, ok := s.Vlan.(*types.VmwareDistributedVirtualSwitchVlanIdSpec); ok {
		return v.VlanId
	}
	return -1
}

// isolated reports whether the setting leaves the port group without uplinks.
func isolated(s *types.VMwareDVSPortSetting) bool {
	t := s.UplinkTeamingPolicy
	return t != nil && t.UplinkPortOrder != nil && !t.UplinkPortOrder.Inherited &&
		len(t.UplinkPortOrder.ActiveUplinkPort) == 0 && len(t.UplinkPortOrder.StandbyUplinkPort) == 0
}

// reconfigurePortGroup writes the port group's description and default port setting, keeping the
// rest of its configuration (vCenter checks configVersion against changes made meanwhile).
func reconfigurePortGroup(ctx context.Context, cn *conn, pg *mo.DistributedVirtualPortgroup, description string, setting *types.VMwareDVSPortSetting) error {
	c := pg.Config
	spec := types.DVPortgroupConfigSpec{ConfigVersion: c.ConfigVersion, Name: c.Name, NumPorts: c.NumPorts, Type: c.Type,
		AutoExpand: c.AutoExpand, Policy: c.Policy, PortNameFormat: c.PortNameFormat, Description: description, DefaultPortConfig: setting,
		VmVnicNetworkResourcePoolKey: c.VmVnicNetworkResourcePoolKey, BackingType: c.BackingType, LogicalSwitchUuid: c.LogicalSwitchUuid}
	t, err := object.NewDistributedVirtualPortgroup(cn.c, pg.Reference()).Reconfigure(ctx, spec)
	if err != nil {
		return err
	}
	return t.Wait(ctx)
}
