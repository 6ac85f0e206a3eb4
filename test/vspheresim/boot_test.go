package vspheresim_test

import (
	"context"
	"encoding/base64"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// TestBootHookSeesGuestinfoAndPowersOff: a VM powered on with cloud-init data in its guestinfo
// boots the hook with that data decoded (the network config taken out of the metadata), and the
// guest's power-off powers the VM off in vCenter.
func TestBootHookSeesGuestinfoAndPowersOff(t *testing.T) {
	booted := make(chan vspheresim.BootVM, 1)
	sim := vspheresim.StartForTest(t, vspheresim.Config{BootHook: func(ctx context.Context, vm vspheresim.BootVM) error {
		booted <- vm
		vm.PowerOff()
		<-ctx.Done()
		return nil
	}})
	ctx := context.Background()
	u, _ := url.Parse(sim.URL + "/sdk")
	u.User = url.UserPassword(sim.Username, sim.Password)
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := find.NewFinder(c.Client).VirtualMachine(ctx, "DC0_C0_RP0_VM1")
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "guestinfo.userdata", Value: b64("#cloud-config\n")},
		&types.OptionValue{Key: "guestinfo.userdata.encoding", Value: "base64"},
		&types.OptionValue{Key: "guestinfo.metadata", Value: b64("instance-id: a\nnetwork: " + b64("version: 2\n") + "\nnetwork.encoding: base64\n")},
		&types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"},
	}})
	if err != nil || task.Wait(ctx) != nil {
		t.Fatal(err)
	}
	if task, err = vm.PowerOn(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatal(err)
	}
	select {
	case got := <-booted:
		if string(got.UserData) != "#cloud-config\n" || string(got.NetworkConfig) != "version: 2\n" || got.IP == "" {
			t.Errorf("booted with %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the VM never booted")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, err := vm.PowerState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if state == types.VirtualMachinePowerStatePoweredOff {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest's power-off left the VM %s", state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
