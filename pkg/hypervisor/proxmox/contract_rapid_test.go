package proxmox

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestOwnershipAndOneVMPerClaimUnderFaultsAndRestarts runs generated interleavings of clones
// and deletions for a few claims, injected hypervisor faults (5xx, 596, hung calls, failing
// tasks) and provider restarts (a new Provider, as a restarted manager builds) against the
// simulator. After every step: every VM the claims' clones created carries this installation's
// ownership naming its own claim, no claim has two VMs, and the foreign VMs are untouched.
func TestOwnershipAndOneVMPerClaimUnderFaultsAndRestarts(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("25") // each check starts a simulator: keep the run bounded
		defer func() { _ = f.Value.Set(f.DefValue) }()
	}
	faults := []pvesim.Fault{
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, Status: 500, Message: "VM 9000 is locked (clone)"},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, Status: 596, Message: "Connection timed out"},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, Hang: true},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, TaskExitStatus: "clone failed: storage full"},
		{Endpoint: "DELETE /nodes/{node}/qemu/{vmid}", Count: 1, TaskExitStatus: "can't lock file '/var/lock/qemu-server/lock-20000.conf' - got timeout"},
		{Endpoint: "GET /nodes/{node}/qemu/{vmid}/config", Count: 1, Status: 500, Message: "Internal Server Error"},
	}
	rapid.Check(t, func(rt *rapid.T) {
		sim := pvesim.StartForTest(t, pvesim.Config{TaskDuration: 2 * time.Millisecond})
		foreignBefore := map[int]pvesim.VM{}
		for _, vm := range sim.VMs() {
			if vm.VMID < 9000 {
				foreignBefore[vm.VMID] = vm
			}
		}
		newProvider := func() *Provider {
			return newTestProvider(t, sim, clusterA, func(c *Config) { c.Timeout = 300 * time.Millisecond })
		}
		p := newProvider()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		claim := func(k int) (hypervisor.VMRef, hypervisor.Ownership) {
			name := fmt.Sprintf("claim-%d", k)
			return hypervisor.VMRef{Node: "pve1", ID: idOf(20000 + k)}, ownerFor(clusterA, name)
		}
		for step := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("op", step)); op {
			case 0, 1: // a claim's reconcile: clone if its VM does not exist
				ref, owner := claim(rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("claim", step)))
				if _, err := p.VM(ctx, ref); err == nil {
					continue
				}
				_, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)},
					Target: ref, Name: owner.ClaimName, Owner: owner})
				if err == nil {
					_ = pollTask(ctx, p, task)
				}
			case 2: // a claim is deleted
				ref, _ := claim(rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("claim", step)))
				if task, err := p.Delete(ctx, ref); err == nil {
					_ = pollTask(ctx, p, task)
				}
			case 3: // a fault is armed
				sim.InjectFault(faults[rapid.IntRange(0, len(faults)-1).Draw(rt, fmt.Sprint("fault", step))])
			case 4: // the manager restarts
				p.Close()
				p = newProvider()
			}
			// Let hung calls' simulated tasks settle before looking.
			time.Sleep(5 * time.Millisecond)
			perClaim := map[string]int{}
			for _, vm := range sim.VMs() {
				if vm.VMID < 20000 || vm.Lock == "clone" {
					continue
				}
				got, err := p.VM(ctx, hypervisor.VMRef{Node: vm.Node, ID: idOf(vm.VMID)})
				if err != nil {
					sim.ClearFaults()
					got, err = p.VM(ctx, hypervisor.VMRef{Node: vm.Node, ID: idOf(vm.VMID)})
				}
				if err != nil {
					rt.Fatalf("step %d: reading VM %d: %v", step, vm.VMID, err)
				}
				if got.Owner == nil || got.Owner.ClaimName != fmt.Sprintf("claim-%d", vm.VMID-20000) {
					rt.Fatalf("step %d: VM %d does not carry its claim's ownership: %+v", step, vm.VMID, got.Owner)
				}
				perClaim[got.Owner.ClaimName]++
			}
			for name, n := range perClaim {
				if n > 1 {
					rt.Fatalf("step %d: claim %s has %d VMs", step, name, n)
				}
			}
			for _, vm := range sim.VMs() {
				if before, ok := foreignBefore[vm.VMID]; ok && (before.Status != vm.Status || before.Description != vm.Description || len(before.Tags) != len(vm.Tags)) {
					rt.Fatalf("step %d: foreign VM %d was touched", step, vm.VMID)
				}
				delete(foreignBefore, vm.VMID)
			}
			if len(foreignBefore) > 0 {
				rt.Fatalf("step %d: foreign VMs gone: %v", step, foreignBefore)
			}
			for _, vm := range sim.VMs() {
				if vm.VMID < 9000 {
					foreignBefore[vm.VMID] = vm
				}
			}
		}
		p.Close()
	})
}
