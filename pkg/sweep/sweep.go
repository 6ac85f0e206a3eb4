package sweep

import (
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Claim is what the sweep needs to know about one MachineClaim.
type Claim struct {
	Namespace, Name, UID string
	// VMID is the claim's VM, 0 before one was chosen.
	VMID int
	// Started is true once the claim powered its VM on: only then does a stopped VM mean "done".
	Started bool
	// Deleting is true when the claim is already going away.
	Deleting bool
	// Busy is true while the claim has a task in flight.
	Busy bool
}

// Plan is what a sweep should do.
type Plan struct {
	// Retire are claims whose VM stopped by itself or disappeared: their Machine (or the claim
	// itself, without a Machine) is deleted, and the claim's deletion removes the VM.
	Retire []Claim
	// RemoveOrphans are owned VMs whose claim no longer exists and whose grace period is over.
	RemoveOrphans []hypervisor.VM
	// Owned counts the VMs the cluster owns.
	Owned int
}

// Orphans remembers when each orphan VM was first seen. It is a cache: after a restart the grace
// period starts again, which only ever delays a removal.
type Orphans map[int]time.Time

// Decide computes a Plan. vms are the owned VMs from one listing; claims are the claims pointing at
// the cluster; grace is how long an orphan is kept.
func Decide(vms []hypervisor.VM, claims []Claim, seen Orphans, now time.Time, grace time.Duration) Plan {
	plan := Plan{Owned: len(vms)}
	byUID := make(map[string]Claim, len(claims))
	for _, c := range claims {
		byUID[c.UID] = c
	}
	present := make(map[int]hypervisor.VM, len(vms))
	for _, vm := range vms {
		present[vm.Ref.ID] = vm
		if vm.Owner == nil {
			continue
		}
		claim, ok := byUID[vm.Owner.ClaimUID]
		if !ok {
			if vm.Lock != "" {
				continue
			}
			first, known := seen[vm.Ref.ID]
			if !known {
				seen[vm.Ref.ID] = now
				first = now
			}
			if now.Sub(first) >= grace {
				plan.RemoveOrphans = append(plan.RemoveOrphans, vm)
			}
			continue
		}
		delete(seen, vm.Ref.ID)
		if claim.Deleting || claim.Busy || !claim.Started || claim.VMID != vm.Ref.ID {
			continue
		}
		if vm.State == hypervisor.PowerStateStopped && vm.Lock == "" {
			plan.Retire = append(plan.Retire, claim)
		}
	}
	for id := range seen {
		if _, ok := present[id]; !ok {
			delete(seen, id)
		}
	}
	for _, c := range claims {
		if c.Started && !c.Deleting && !c.Busy && c.VMID != 0 {
			if _, ok := present[c.VMID]; !ok {
				plan.Retire = append(plan.Retire, c)
			}
		}
	}
	return plan
}
