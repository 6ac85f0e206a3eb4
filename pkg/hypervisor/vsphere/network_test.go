package vsphere_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/vsphere"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

func portgroup(t *testing.T, sim *vspheresim.Simulator, name string) (vspheresim.Portgroup, bool) {
	t.Helper()
	for _, pg := range sim.Portgroups() {
		if pg.Name == name {
			return pg, true
		}
	}
	return vspheresim.Portgroup{}, false
}

// cloneVM clones the default template and waits for the clone.
func cloneVM(t *testing.T, p *vsphere.Provider, name string) hypervisor.VMRef {
	t.Helper()
	ctx := context.Background()
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: name,
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: name, ClaimID: name}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	return ref
}

// TestNetworkAsPortGroup drives a VLAN network's life: the port group hf-<ID> is made on the
// switch with the VLAN and the installation's mark, a second ensure changes nothing (one
// property read), a changed VLAN is written, a VM's NIC joins it through a distributed port
// backing with the network's bandwidth cap as the port group's shaping, vCenter refuses to
// destroy it while the VM uses it, and it goes once the VM is gone.
func TestNetworkAsPortGroup(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	n := hypervisor.VirtualNetwork{ID: "ci", Title: "fleet/ci", Kind: hypervisor.NetworkVLAN, VLAN: 120, MTU: 1500,
		Subnets: []hypervisor.Subnet{{CIDR: netip.MustParsePrefix("10.20.0.0/24"), Gateway: netip.MustParseAddr("10.20.0.1")}}}

	real, err := p.EnsureNetwork(ctx, n)
	if err != nil || real.Bridge != "hf-ci" || real.VLAN != 0 || real.SecurityGroup != "" {
		t.Fatalf("EnsureNetwork: %+v %v", real, err)
	}
	pg, ok := portgroup(t, sim, "hf-ci")
	if !ok || pg.VLAN != 120 || pg.NoUplinks || pg.Switch != sim.Switch || !strings.Contains(pg.Description, "fleet/ci") ||
		!strings.Contains(pg.Description, "hyperfleet.installation=inst0000a") {
		t.Fatalf("port group: %+v %v", pg, ok)
	}

	sim.ResetCalls()
	if _, err := p.EnsureNetwork(ctx, n); err != nil {
		t.Fatal(err)
	}
	if calls := sim.Calls(); len(calls) != 1 || calls["RetrievePropertiesEx"] != 1 {
		t.Errorf("a second ensure of an unchanged network: %v", calls)
	}
	if again, _ := portgroup(t, sim, "hf-ci"); again != pg {
		t.Errorf("the second ensure changed the port group: %+v", again)
	}

	n.VLAN = 121
	if _, err := p.EnsureNetwork(ctx, n); err != nil {
		t.Fatal(err)
	}
	if pg, _ := portgroup(t, sim, "hf-ci"); pg.VLAN != 121 {
		t.Errorf("VLAN after a change: %+v", pg)
	}

	ref := cloneVM(t, p, "runner-1")
	nic := hypervisor.NIC{Name: "eth0", Bridge: real.Bridge, MAC: "02:00:00:00:01:01", Policy: &hypervisor.NICPolicy{RateMbps: 100}}
	for range 2 {
		sim.ResetCalls()
		task, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{nic}})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, p, task)
	}
	if calls := sim.Calls(); calls["ReconfigureDVPortgroup_Task"] != 0 {
		t.Errorf("the unchanged rate was written again: %v", calls)
	}
	if vm := simVM(t, sim, ref.ID); len(vm.Networks) != 1 || vm.Networks[0] != "hf-ci" || vm.MACs[0] != "02:00:00:00:01:01" {
		t.Errorf("the VM's adapters: %v %v", vm.Networks, vm.MACs)
	}
	if pg, _ := portgroup(t, sim, "hf-ci"); pg.InMbps != 100 || pg.OutMbps != 100 || pg.VLAN != 121 {
		t.Errorf("the port group's shaping: %+v", pg)
	}
	// An ensure keeps the shaping the NICs set.
	if _, err := p.EnsureNetwork(ctx, n); err != nil {
		t.Fatal(err)
	}
	if pg, _ := portgroup(t, sim, "hf-ci"); pg.InMbps != 100 {
		t.Errorf("the ensure dropped the shaping: %+v", pg)
	}
	// Nobody's port group is shaped but HyperFleet's, and the rules vSphere cannot apply are refused.
	for _, bad := range []struct {
		nic  hypervisor.NIC
		want error
	}{
		{hypervisor.NIC{Bridge: sim.Network, Policy: &hypervisor.NICPolicy{RateMbps: 50}}, hypervisor.ErrNotOwned},
		{hypervisor.NIC{Bridge: real.Bridge, Policy: &hypervisor.NICPolicy{Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "DROP"}}}}, hypervisor.ErrUnsupported},
	} {
		if _, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{bad.nic}}); !errors.Is(err, bad.want) {
			t.Errorf("NIC %+v: %v", bad.nic, err)
		}
	}
	if pg, _ := portgroup(t, sim, sim.Network); pg.InMbps != 0 {
		t.Errorf("another's port group was shaped: %+v", pg)
	}

	err = p.DeleteNetwork(ctx, "ci", hypervisor.Ownership{})
	if !errors.Is(err, hypervisor.ErrBusy) || !strings.Contains(err.Error(), "The resource 'hf-ci' is in use") {
		t.Errorf("deleting a port group a VM uses: %v", err)
	}
	if _, ok := portgroup(t, sim, "hf-ci"); !ok {
		t.Fatal("the used port group was destroyed")
	}
	task, err := p.Delete(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	for range 2 {
		if err := p.DeleteNetwork(ctx, "ci", hypervisor.Ownership{}); err != nil {
			t.Errorf("DeleteNetwork once the VM is gone: %v", err)
		}
	}
	if _, ok := portgroup(t, sim, "hf-ci"); ok {
		t.Error("the port group is still there")
	}
}

// TestIsolatedNetworkAndSwitches: an Isolated network is a port group without uplinks; with
// several switches a VLAN needs its switch named, an MTU other than the switch's is refused, and a
// refused creation leaves nothing.
func TestIsolatedNetworkAndSwitches(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")

	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "iso", Kind: hypervisor.NetworkIsolated}); err != nil {
		t.Fatal(err)
	}
	if pg, _ := portgroup(t, sim, "hf-iso"); !pg.NoUplinks || pg.VLAN != 0 {
		t.Errorf("an isolated port group: %+v", pg)
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "big", Kind: hypervisor.NetworkVLAN, VLAN: 7, MTU: 9000}); !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Errorf("an MTU the switch does not have: %v", err)
	}

	if err := sim.AddSwitch("jumbo", 9000); err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "v7", Kind: hypervisor.NetworkVLAN, VLAN: 7}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("a VLAN among several switches without an uplink: %v", err)
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "big", Kind: hypervisor.NetworkVLAN, VLAN: 7, MTU: 9000, Uplink: "jumbo"}); err != nil {
		t.Fatal(err)
	}
	if pg, _ := portgroup(t, sim, "hf-big"); pg.Switch != "jumbo" || pg.VLAN != 7 {
		t.Errorf("a VLAN on the named switch: %+v", pg)
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "big", Kind: hypervisor.NetworkVLAN, VLAN: 7, Uplink: sim.Switch}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("moving a port group to another switch: %v", err)
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "iso2", Kind: hypervisor.NetworkIsolated}); err != nil {
		t.Fatal(err)
	}
	if pg, _ := portgroup(t, sim, "hf-iso2"); pg.Switch != sim.Switch {
		t.Errorf("an isolated network among several switches: %+v", pg)
	}

	sim.Fail("AddDVPortgroup_Task", &types.NoPermission{PrivilegeId: "DVPortgroup.Create"}, 1)
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "denied", Kind: hypervisor.NetworkIsolated}); !errors.Is(err, hypervisor.ErrForbidden) {
		t.Errorf("a creation refused for a privilege: %v", err)
	}
	if _, ok := portgroup(t, sim, "hf-denied"); ok {
		t.Error("a refused creation left a port group")
	}
	if _, err := p.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "Bad-ID", Kind: hypervisor.NetworkIsolated}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("an ID that is no port group name: %v", err)
	}
}

// TestForeignPortGroupsAreNotTouched plays another installation that made the same network, and an
// administrator's port group of HyperFleet's name: neither is changed nor destroyed.
func TestForeignPortGroupsAreNotTouched(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	ours := newProvider(t, sim, "inst0000a")
	theirs := newProvider(t, sim, "inst0000b") // same HypervisorCluster namespace/name, another installation

	if _, err := theirs.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: "ci", Title: "fleet/ci", Kind: hypervisor.NetworkVLAN, VLAN: 10}); err != nil {
		t.Fatal(err)
	}
	if err := sim.AddPortgroup("hf-lab", "the lab's uplink to the routers", 5); err != nil {
		t.Fatal(err)
	}
	before := sim.Portgroups()
	for _, id := range []string{"ci", "lab"} {
		_, err := ours.EnsureNetwork(ctx, hypervisor.VirtualNetwork{ID: id, Title: "fleet/" + id, Kind: hypervisor.NetworkVLAN, VLAN: 20})
		if !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("ensuring over %s: %v", id, err)
		}
		if err := ours.DeleteNetwork(ctx, id, hypervisor.Ownership{}); !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("deleting %s: %v", id, err)
		}
	}
	after := sim.Portgroups()
	if len(after) != len(before) {
		t.Fatalf("port groups changed: %+v, then %+v", before, after)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("port group changed: %+v, then %+v", before[i], after[i])
		}
	}
}

// TestNetworkGaps: what vSphere lacks without NSX is listed, without a call, with the VMNetwork's
// field.
func TestNetworkGaps(t *testing.T) {
	p, err := vsphere.New(vsphere.Config{Endpoint: "https://vcenter.invalid", Username: "u", Password: "p", Cluster: "fleet/vsphere", InstallationID: "inst0000a"})
	if err != nil {
		t.Fatal(err)
	}
	subnet := func(dhcp, snat bool) hypervisor.Subnet {
		s := hypervisor.Subnet{CIDR: netip.MustParsePrefix("10.20.0.0/24"), SNAT: snat}
		if dhcp {
			s.DHCPStart, s.DHCPEnd = netip.MustParseAddr("10.20.0.100"), netip.MustParseAddr("10.20.0.200")
		}
		return s
	}
	for _, tc := range []struct {
		name string
		n    hypervisor.VirtualNetwork
		want []string
	}{
		{"a plain VLAN", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkVLAN, VLAN: 7, Subnets: []hypervisor.Subnet{subnet(false, false)}}, nil},
		{"an isolated network", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkIsolated}, nil},
		{"VXLAN", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkVXLAN, VNI: 5000}, []string{"spec.type"}},
		{"rules", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkIsolated, Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "ACCEPT"}}}, []string{"spec.securityPolicy"}},
		{"DHCP and SNAT", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkIsolated, Subnets: []hypervisor.Subnet{subnet(false, false), subnet(true, true)}},
			[]string{"spec.subnets[1].dhcp", "spec.subnets[1].snat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, g := range p.NetworkGaps(tc.n) {
				if g.Reason == "" {
					t.Errorf("gap %s without a reason", g.Field)
				}
				got = append(got, g.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("gaps %v, want %v", got, tc.want)
			}
		})
	}
}
