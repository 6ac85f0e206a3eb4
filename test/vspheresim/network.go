package vspheresim

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// vcsim (govmomi v0.52.0) destroys a distributed port group that VMs are connected to; vCenter
// refuses with ResourceInUse. The front plays vCenter's refusal, so the port group of a VM stays
// until the VM leaves it: a Destroy_Task on a port group in use meets a fault rule made for that
// one call.

// destroyedPortgroup finds the port group a Destroy_Task request is for.
var destroyedPortgroup = regexp.MustCompile(`<_this[^>]*type="DistributedVirtualPortgroup"[^>]*>([^<]+)</_this>`)

// refuseDestroyingUsedPortgroup answers a Destroy_Task on a port group that a VM or template is
// connected to as vCenter does.
func (s *Simulator) refuseDestroyingUsedPortgroup(method string, body []byte) {
	if method != "Destroy_Task" {
		return
	}
	m := destroyedPortgroup.FindSubmatch(body)
	if m == nil {
		return
	}
	ref := types.ManagedObjectReference{Type: "DistributedVirtualPortgroup", Value: string(m[1])}
	ctx := s.model.Service.Context
	pg, ok := ctx.Map.Get(ref).(*simulator.DistributedVirtualPortgroup)
	if !ok {
		return
	}
	used := false
	for _, e := range ctx.Map.All("VirtualMachine") {
		if vm := asVM(e); vm != nil {
			ctx.WithLock(vm, func() { used = used || slices.Contains(vm.Network, ref) })
		}
	}
	if used {
		s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: method, ObjectType: ref.Type, ObjectName: pg.Name,
			Probability: 1, FaultType: simulator.FaultTypeCustom, Fault: &types.ResourceInUse{Type: "Network", Name: pg.Name},
			Message: fmt.Sprintf("The resource '%s' is in use.", pg.Name), MaxCount: 1, Enabled: true})
	}
}

// Portgroup is a distributed port group as the simulator holds it, for assertions.
type Portgroup struct {
	Name, Switch, Description string
	// VLAN is the VLAN ID the port group's ports are tagged with, 0 for none.
	VLAN int
	// NoUplinks is set when the port group uses none of its switch's uplinks.
	NoUplinks bool
	// InMbps and OutMbps are the traffic shaping of each port, 0 when off.
	InMbps, OutMbps int
}

// Portgroups lists the distributed port groups, by name, without the switches' uplink groups.
func (s *Simulator) Portgroups() []Portgroup {
	ctx := s.model.Service.Context
	var out []Portgroup
	for _, e := range ctx.Map.All("DistributedVirtualPortgroup") {
		pg, ok := e.(*simulator.DistributedVirtualPortgroup)
		if !ok {
			continue
		}
		ctx.WithLock(pg, func() {
			p := Portgroup{Name: pg.Name, Description: pg.Config.Description}
			if ref := pg.Config.DistributedVirtualSwitch; ref != nil {
				if sw, ok := ctx.Map.Get(*ref).(*simulator.DistributedVirtualSwitch); ok {
					p.Switch = sw.Name
				}
			}
			set, _ := pg.Config.DefaultPortConfig.(*types.VMwareDVSPortSetting)
			if set == nil {
				out = append(out, p)
				return
			}
			if _, trunk := set.Vlan.(*types.VmwareDistributedVirtualSwitchTrunkVlanSpec); trunk {
				return // an uplink group
			}
			if v, ok := set.Vlan.(*types.VmwareDistributedVirtualSwitchVlanIdSpec); ok {
				p.VLAN = int(v.VlanId)
			}
			if t := set.UplinkTeamingPolicy; t != nil && t.UplinkPortOrder != nil && !t.UplinkPortOrder.Inherited {
				p.NoUplinks = len(t.UplinkPortOrder.ActiveUplinkPort)+len(t.UplinkPortOrder.StandbyUplinkPort) == 0
			}
			p.InMbps, p.OutMbps = mbps(set.InShapingPolicy), mbps(set.OutShapingPolicy)
			out = append(out, p)
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func mbps(p *types.DVSTrafficShapingPolicy) int {
	if p == nil || p.Enabled == nil || p.Enabled.Value == nil || !*p.Enabled.Value || p.AverageBandwidth == nil {
		return 0
	}
	return int(p.AverageBandwidth.Value / 1_000_000)
}

// networkOf names the port group or network a VM's adapter is connected to.
func networkOf(ctx *simulator.Context, card *types.VirtualEthernetCard) string {
	switch b := card.Backing.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		return b.DeviceName
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		ref := types.ManagedObjectReference{Type: "DistributedVirtualPortgroup", Value: b.Port.PortgroupKey}
		if pg, ok := ctx.Map.Get(ref).(*simulator.DistributedVirtualPortgroup); ok {
			return pg.Name
		}
	}
	return ""
}

// AddPortgroup makes a distributed port group on the first switch through vCenter's API, as an
// administrator would: one that is not HyperFleet's.
func (s *Simulator) AddPortgroup(name, description string, vlan int) error {
	return s.asAdmin(func(ctx context.Context, c *govmomi.Client, f *find.Finder, dc *object.Datacenter) error {
		nets, err := f.NetworkList(ctx, "*")
		if err != nil {
			return err
		}
		for _, n := range nets {
			if sw, ok := n.(*object.DistributedVirtualSwitch); ok {
				t, err := sw.AddPortgroup(ctx, []types.DVPortgroupConfigSpec{{Name: name, Description: description, NumPorts: 1,
					Type:              string(types.DistributedVirtualPortgroupPortgroupTypeEarlyBinding),
					DefaultPortConfig: &types.VMwareDVSPortSetting{Vlan: &types.VmwareDistributedVirtualSwitchVlanIdSpec{VlanId: int32(vlan)}}}})
				if err != nil {
					return err
				}
				return t.Wait(ctx)
			}
		}
		return fmt.Errorf("the datacenter has no distributed switch")
	})
}

// AddSwitch makes another distributed switch with the given MTU, every host of the datacenter a
// member of it.
func (s *Simulator) AddSwitch(name string, mtu int) error {
	return s.asAdmin(func(ctx context.Context, c *govmomi.Client, f *find.Finder, dc *object.Datacenter) error {
		folders, err := dc.Folders(ctx)
		if err != nil {
			return err
		}
		hosts, err := f.HostSystemList(ctx, "*")
		if err != nil {
			return err
		}
		spec := &types.VMwareDVSConfigSpec{DVSConfigSpec: types.DVSConfigSpec{Name: name}, MaxMtu: int32(mtu)}
		for _, h := range hosts {
			spec.Host = append(spec.Host, types.DistributedVirtualSwitchHostMemberConfigSpec{
				Operation: string(types.ConfigSpecOperationAdd), Host: h.Reference()})
		}
		t, err := folders.NetworkFolder.CreateDVS(ctx, types.DVSCreateSpec{ConfigSpec: &types.VMwareDVSConfigSpec{
			DVSConfigSpec: types.DVSConfigSpec{Name: name}, MaxMtu: int32(mtu)}})
		if err != nil {
			return err
		}
		info, err := t.WaitForResult(ctx)
		if err != nil {
			return err
		}
		sw := object.NewDistributedVirtualSwitch(c.Client, info.Result.(types.ManagedObjectReference))
		if t, err = sw.Reconfigure(ctx, spec); err != nil {
			return err
		}
		return t.Wait(ctx)
	})
}
