package sweep

import (
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Claim is what the sweep needs to know about one MachineClaim.
type Claim struct {
	Namespace, Name string
	// ID is the claim's spec.claimID, the identity its VM carries; empty until the claim
	// controller recorded one.
	ID string
	// UID is the claim's metadata.uid: VMs marked by releases before claim IDs carry it.
	UID string
	// VMID is the ID of the claim's VM, empty before one was chosen or created.
	VMID string
	// Started is true once the claim powered its VM on: only then does a stopped VM mean "done".
	Started bool
	// Deleting is true when the claim is already going away.
	Deleting bool
	// Busy is true while the claim has a task in flight.
	Busy bool
	// Warm is true for a warm VM not started yet: cloned, configured and stopped on purpose. Its
	// stopped VM is its resting state, never a runner that finished, so the sweep leaves it alone
	// whatever else the claim's status says (a status rebuilt after a move may say Started).
	Warm bool
	// Persistent is true for a long-lived VM: the sweep never retires it, whatever its power
	// state, and reports what it saw instead (Plan.Observed).
	Persistent bool
}

// Observation is a persistent claim's VM as the listing showed it.
type Observation struct {
	Claim Claim
	VM    hypervisor.VM
}

// Adoption is a VM marked by an older release that a claim of this installation tracks.
type Adoption struct {
	Claim Claim
	VM    hypervisor.VM
}

// Plan is what a sweep should do.
type Plan struct {
	// Retire are claims whose VM stopped by itself: their runner is retired and the claim's
	// deletion removes the VM.
	Retire []Claim
	// Missing are started claims whose VM the listing did not show. A listing can be incomplete
	// (a node that did not answer), so each must be confirmed gone by a direct read before it is
	// retired.
	Missing []Claim
	// RemoveOrphans are owned VMs whose claim no longer exists and whose grace period is over.
	RemoveOrphans []hypervisor.VM
	// Adopt are Legacy VMs that a claim tracks (same VMID and metadata.uid): they are re-marked
	// with the installation's identity. Legacy VMs no claim tracks may be another installation's
	// and are left alone.
	Adopt []Adoption
	// Observed are the persistent claims' VMs the listing showed: their claims' power state and
	// resource usage are refreshed from it, and their run strategy decides what happens next.
	Observed []Observation
	// Owned counts the VMs the cluster owns, adopted ones included.
	Owned int
	// Legacy counts the Legacy VMs no claim tracks.
	Legacy int
}

// Orphans remembers when each orphan VM was first seen. It is a cache: after a restart the grace
// period starts again, which only ever delays a removal.
type Orphans map[string]time.Time

type claimKey struct{ namespace, name, id string }

// Decide computes a Plan. vms are the owned VMs from one listing; claims are the claims pointing at
// the cluster; grace is how long an orphan is kept.
func Decide(vms []hypervisor.VM, claims []Claim, seen Orphans, now time.Time, grace time.Duration) Plan {
	var plan Plan
	byKey := make(map[claimKey]Claim, len(claims))
	byVMID := make(map[string]Claim, len(claims))
	for _, c := range claims {
		if c.ID != "" {
			byKey[claimKey{c.Namespace, c.Name, c.ID}] = c
		}
		if c.VMID != "" {
			byVMID[c.VMID] = c
		}
	}
	present := make(map[string]hypervisor.VM, len(vms))
	for _, vm := range vms {
		present[vm.Ref.ID] = vm
		switch {
		case vm.Owner == nil:
			continue
		case vm.Owner.Legacy:
			if c, ok := byVMID[vm.Ref.ID]; ok && c.ID != "" && c.UID == vm.Owner.LegacyClaimUID &&
				c.Namespace == vm.Owner.ClaimNamespace && c.Name == vm.Owner.ClaimName {
				plan.Adopt = append(plan.Adopt, Adoption{Claim: c, VM: vm})
				plan.Owned++
			} else {
				plan.Legacy++
			}
			continue
		}
		plan.Owned++
		claim, ok := byKey[claimKey{vm.Owner.ClaimNamespace, vm.Owner.ClaimName, vm.Owner.ClaimID}]
		switch {
		case ok && (claim.VMID == vm.Ref.ID || claim.VMID == ""):
			// The claim's VM, or one it has not found again yet (its status was lost, e.g. by
			// clusterctl move, and it recovers the VM from its providerID).
			delete(seen, vm.Ref.ID)
		case vm.Lock != "":
			continue
		default:
			// No claim, or its claim has moved on to another VM (a leftover of a lost status).
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
		if claim.Persistent && claim.VMID == vm.Ref.ID && !claim.Deleting {
			plan.Observed = append(plan.Observed, Observation{Claim: claim, VM: vm})
			continue
		}
		if claim.Deleting || claim.Busy || !claim.Started || claim.Warm || claim.VMID != vm.Ref.ID {
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
		if c.Started && !c.Deleting && !c.Busy && !c.Persistent && !c.Warm && c.VMID != "" {
			if _, ok := present[c.VMID]; !ok {
				plan.Missing = append(plan.Missing, c)
			}
		}
	}
	return plan
}
