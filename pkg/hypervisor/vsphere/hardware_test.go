package vsphere_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// TestExtraDisksAndNICs: extra disks are added once (applying the spec again adds nothing), the
// NIC list becomes the VM's adapters in order with the caller's MACs, and what vSphere has no
// place for (a VLAN tag on a NIC, a per-NIC firewall) is refused with a reason.
func TestExtraDisksAndNICs(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: "db-0",
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: "db-0", ClaimID: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	before := len(simVM(t, sim, ref.ID).DiskGiB)
	spec := hypervisor.ConfigSpec{
		ExtraDisks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 20}, {Name: "logs", SizeGiB: 5}},
		NICs: []hypervisor.NIC{{Name: "eth0", Bridge: sim.Network, MAC: "02:00:00:00:00:01"},
			{Name: "eth1", Bridge: sim.Network, MAC: "02:00:00:00:00:02"}},
	}
	for range 2 {
		task, err = p.Configure(ctx, ref, spec)
		if err != nil {
			t.Fatal(err)
		}
		wait(t, p, task)
	}
	got := simVM(t, sim, ref.ID)
	if len(got.DiskGiB) != before+2 || got.DiskGiB[before] != 20 || got.DiskGiB[before+1] != 5 {
		t.Errorf("disks: %v (the template had %d)", got.DiskGiB, before)
	}
	if len(got.MACs) != 2 || got.MACs[0] != "02:00:00:00:00:01" || got.MACs[1] != "02:00:00:00:00:02" {
		t.Errorf("adapters: %v", got.MACs)
	}

	task, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{{Bridge: sim.Network, MAC: "02:00:00:00:00:03"}}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if got := simVM(t, sim, ref.ID).MACs; len(got) != 1 || got[0] != "02:00:00:00:00:03" {
		t.Errorf("a shorter NIC list leaves adapters: %v", got)
	}
	for _, bad := range []hypervisor.NIC{{Bridge: sim.Network, VLAN: 42}, {Bridge: sim.Network, Firewall: true}} {
		if _, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{bad}}); !errors.Is(err, hypervisor.ErrUnsupported) {
			t.Errorf("NIC %+v: %v", bad, err)
		}
	}
	sata := hypervisor.ConfigSpec{ExtraDisks: []hypervisor.ExtraDisk{{Name: "x", SizeGiB: 1, Bus: "sata"}}}
	if _, err := p.Configure(ctx, ref, sata); !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Errorf("a SATA disk: %v", err)
	}
	// The same refusals before any VM is made.
	for _, spec := range []hypervisor.ConfigSpec{sata, {NICs: []hypervisor.NIC{{Bridge: "pg", VLAN: 7}}},
		{Network: &hypervisor.NetworkSpec{Name: "pg", VLAN: 7}}, {PCIDevices: []hypervisor.PCIDevice{{Mapping: "gpu"}}}} {
		if err := p.CheckHardware(spec); !errors.Is(err, hypervisor.ErrUnsupported) {
			t.Errorf("CheckHardware(%+v): %v", spec, err)
		}
	}
	if err := p.CheckHardware(spec); err != nil {
		t.Errorf("CheckHardware of what vSphere gives: %v", err)
	}
}
