package vsphere

import (
	"context"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A NIC's bandwidth cap (NICPolicy.RateMbps) is its port group's traffic shaping, inbound and
// outbound: vSphere applies a distributed port group's shaping to each of its ports, so every NIC
// on the network is capped at the rate on its own. The rate is the network's (its VMNetwork's
// QoS), so all NICs on one port group carry the same; Configure writes it to the port group when
// it differs, before the VM's reconfiguration, and only to a port group HyperFleet made.

// shapingRate is the cap of a setting in Mbps, 0 when it shapes nothing or in and out differ.
func shapingRate(s *types.VMwareDVSPortSetting) int {
	if s == nil {
		return 0
	}
	in, out := rateOf(s.InShapingPolicy), rateOf(s.OutShapingPolicy)
	if in != out {
		return -1
	}
	return in
}

func rateOf(p *types.DVSTrafficShapingPolicy) int {
	if p == nil || p.Enabled == nil || p.Enabled.Value == nil || !*p.Enabled.Value || p.AverageBandwidth == nil {
		return 0
	}
	return int(p.AverageBandwidth.Value / 1_000_000)
}

// shaping caps a direction at mbps (average and peak), with a burst of 100 ms at that rate; 0
// turns shaping off.
func shaping(mbps int) *types.DVSTrafficShapingPolicy {
	if mbps == 0 {
		return &types.DVSTrafficShapingPolicy{Enabled: &types.BoolPolicy{Value: types.NewBool(false)}}
	}
	bps := int64(mbps) * 1_000_000
	return &types.DVSTrafficShapingPolicy{Enabled: &types.BoolPolicy{Value: types.NewBool(true)},
		AverageBandwidth: &types.LongPolicy{Value: bps}, PeakBandwidth: &types.LongPolicy{Value: bps},
		BurstSize: &types.LongPolicy{Value: bps / 8 / 10}}
}

// applyRates sets the traffic shaping of each port group to its rate, where it differs.
func (p *Provider) applyRates(ctx context.Context, cn *conn, rates map[types.ManagedObjectReference]int) error {
	for ref, rate := range rates {
		var pg mo.DistributedVirtualPortgroup
		if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, ref, []string{"name", "config"}, &pg); err != nil {
			return err
		}
		current := portSettingOf(&pg)
		if shapingRate(current) == rate {
			continue
		}
		if !p.ownsPortGroup(&pg) {
			return refused(hypervisor.ErrNotOwned, "Configure", "port group %s does not carry this HypervisorCluster's mark: HyperFleet caps bandwidth only on its own port groups", pg.Name)
		}
		var s types.VMwareDVSPortSetting
		if current != nil {
			s = *current
		}
		s.InShapingPolicy, s.OutShapingPolicy = shaping(rate), shaping(rate)
		if err := reconfigurePortGroup(ctx, cn, &pg, pg.Config.Description, &s); err != nil {
			return err
		}
	}
	return nil
}
