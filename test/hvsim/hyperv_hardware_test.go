package hvsim

import (
	"strings"
	"testing"
)

// TestNewVHD: New-VHD refuses a path where a file is, as Hyper-V does, and a dynamic disk outside
// VHDX's limits; a differencing disk takes its parent's size.
func TestNewVHD(t *testing.T) {
	hv := NewHyperV(HyperVConfig{})
	hv.AddHost("hv1", 4, 4096, HyperVSwitch)
	hh := hv.hosts["hv1"]
	path := `C:\Disks\a.vhdx`
	if err := hh.newVHD(path, 1<<30, ""); err != nil {
		t.Fatal(err)
	}
	err := hh.newVHD(path, 1<<30, "")
	if err == nil || err.class != "AlreadyExists" || !strings.Contains(err.message, "The file exists. (0x80070050)") {
		t.Fatalf("second New-VHD: %v", err)
	}
	for _, size := range []int64{0, 1 << 20, 65 << 40} {
		if err := hh.newVHD(`C:\Disks\b.vhdx`, size, ""); err == nil || err.class != "Invalid" {
			t.Errorf("size %d: %v", size, err)
		}
	}
	if err := hh.newVHD(`relative.vhdx`, 1<<30, ""); err == nil {
		t.Error("a relative path was accepted")
	}
}

// TestNewVMHasOneAdapter: New-VM makes one adapter, "Network Adapter", on no switch.
func TestNewVMHasOneAdapter(t *testing.T) {
	hv := NewHyperV(HyperVConfig{})
	hv.AddHost("hv1", 4, 4096, HyperVSwitch)
	if _, err := hv.AddVM("hv1", "x", "", false); err != nil {
		t.Fatal(err)
	}
	a := hv.VMs("hv1")[0].Adapters
	if len(a) != 1 || a[0].Name != "Network Adapter" || a[0].Switch != "" || a[0].StaticMAC {
		t.Fatalf("adapters %+v", a)
	}
}
