package sweep

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// genInventory draws claims in every state and a listing of VMs: most claims' own VMs (now and
// then marked with a recreated claim's ID), foreign ones, ones marked by an older release
// (tracked by a claim or not), and owned ones naming a claim that is gone or that moved on to
// another VM; running, stopped, paused, locked or not. VM IDs are unique; a claim's VMID may
// name a VM that is not listed.
func genInventory(rt *rapid.T) ([]hypervisor.VM, []Claim) {
	var claims []Claim
	for i := range rapid.IntRange(0, 6).Draw(rt, "claims") {
		label := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
		c := Claim{Namespace: rapid.SampledFrom([]string{"ns", "team-b"}).Draw(rt, label("ns")), Name: fmt.Sprint("c", i),
			UID: fmt.Sprint("uid-", i)}
		if rapid.IntRange(0, 5).Draw(rt, label("hasID")) > 0 {
			c.ID = fmt.Sprint("id-", i)
		}
		if rapid.IntRange(0, 4).Draw(rt, label("hasVMID")) > 0 {
			c.VMID = idOf(100 + rapid.IntRange(0, 9).Draw(rt, label("vmid")))
		}
		c.Started = rapid.IntRange(0, 3).Draw(rt, label("started")) > 0
		c.Deleting = rapid.IntRange(0, 4).Draw(rt, label("deleting")) == 0
		c.Busy = rapid.IntRange(0, 4).Draw(rt, label("busy")) == 0
		c.Warm = rapid.IntRange(0, 4).Draw(rt, label("warm")) == 0
		c.Persistent = rapid.IntRange(0, 3).Draw(rt, label("persistent")) == 0
		claims = append(claims, c)
	}
	var vms []hypervisor.VM
	listed := map[string]bool{}
	newVM := func(id, label string) hypervisor.VM {
		listed[id] = true
		return hypervisor.VM{Ref: hypervisor.VMRef{Node: "pve1", ID: id},
			State: rapid.SampledFrom([]hypervisor.PowerState{hypervisor.PowerStateRunning, hypervisor.PowerStateStopped,
				hypervisor.PowerStatePaused, hypervisor.PowerStateUnknown}).Draw(rt, label+"state"),
			Lock: rapid.SampledFrom([]string{"", "", "", "clone", "migrate"}).Draw(rt, label+"lock")}
	}
	mark := func(c Claim, label string) *hypervisor.Ownership {
		id := c.ID
		if id == "" || rapid.IntRange(0, 5).Draw(rt, label+"recreated") == 0 {
			id = "id-before"
		}
		return &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: c.Namespace, ClaimName: c.Name, ClaimID: id}
	}
	for i, c := range claims {
		label := fmt.Sprint("own", i)
		if c.VMID == "" || listed[c.VMID] || rapid.IntRange(0, 3).Draw(rt, label+"listed") == 0 {
			continue
		}
		vm := newVM(c.VMID, label)
		if rapid.IntRange(0, 5).Draw(rt, label+"legacy") == 0 {
			uid := c.UID
			if rapid.Bool().Draw(rt, label+"otherUID") { // the claim was recreated under its name
				uid = "uid-other"
			}
			vm.Owner = &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: c.Namespace, ClaimName: c.Name, Legacy: true, LegacyClaimUID: uid}
		} else {
			vm.Owner = mark(c, label)
		}
		vms = append(vms, vm)
	}
	for j := range rapid.IntRange(0, 4).Draw(rt, "others") {
		label := fmt.Sprint("other", j)
		id := idOf(100 + rapid.IntRange(0, 9).Draw(rt, label+"id"))
		if listed[id] {
			continue
		}
		vm := newVM(id, label)
		// The claim the VM's marks name: one of the claims, or one that is gone.
		named := Claim{Namespace: "ns", Name: "gone", ID: "id-gone", UID: "uid-gone"}
		if len(claims) > 0 && rapid.Bool().Draw(rt, label+"namesLive") {
			named = claims[rapid.IntRange(0, len(claims)-1).Draw(rt, label+"claim")]
		}
		switch rapid.IntRange(0, 3).Draw(rt, label+"owner") {
		case 0: // foreign
		case 1: // an older release's marks
			uid := named.UID
			if rapid.Bool().Draw(rt, label+"otherUID") {
				uid = "uid-other"
			}
			vm.Owner = &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: named.Namespace, ClaimName: named.Name, Legacy: true, LegacyClaimUID: uid}
		default:
			vm.Owner = mark(named, label)
		}
		vms = append(vms, vm)
	}
	return vms, claims
}

// trackedBy is the claim whose VM vm is: the claim its marks name (namespace, name and claim ID)
// that points at it or has not found its VM again yet.
func trackedBy(vm hypervisor.VM, claims []Claim) (Claim, bool) {
	if vm.Owner == nil || vm.Owner.Legacy {
		return Claim{}, false
	}
	for _, c := range claims {
		if c.ID != "" && c.Namespace == vm.Owner.ClaimNamespace && c.Name == vm.Owner.ClaimName && c.ID == vm.Owner.ClaimID &&
			(c.VMID == vm.Ref.ID || c.VMID == "") {
			return c, true
		}
	}
	return Claim{}, false
}

// TestSweepNeverTouchesWhatIsNotAFinishedRunner runs the sweep over a generated inventory at
// generated instants, with restarts that forget the orphans seen. Whatever the inventory: no
// foreign VM, no VM marked by an older release, no VM a claim tracks (a persistent claim's
// included) and no locked VM is ever removed; an orphan is removed exactly once it has been seen
// for the grace period since the last restart. Only a started, ephemeral, idle claim whose own VM
// is listed stopped and unlocked is retired, never one whose VM runs; a claim is reported missing
// only when its VM is not listed; only persistent claims are observed; only an older release's
// VM its own claim tracks is adopted.
func TestSweepNeverTouchesWhatIsNotAFinishedRunner(t *testing.T) {
	const grace = 5 * time.Minute
	rapid.Check(t, func(rt *rapid.T) {
		vms, claims := genInventory(rt)
		listed := map[string]hypervisor.VM{}
		for _, vm := range vms {
			listed[vm.Ref.ID] = vm
		}
		seen := Orphans{}
		now := time.Unix(1_700_000_000, 0)
		var since *time.Time // when the orphans were first seen since the last restart
		for step := range rapid.IntRange(1, 6).Draw(rt, "sweeps") {
			if rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("restart", step)) == 0 {
				seen, since = Orphans{}, nil
			}
			if since == nil {
				first := now
				since = &first
			}
			plan := Decide(slices.Clone(vms), slices.Clone(claims), seen, now, grace)

			for _, vm := range vms {
				removed := slices.ContainsFunc(plan.RemoveOrphans, func(o hypervisor.VM) bool { return o.Ref == vm.Ref })
				_, tracked := trackedBy(vm, claims)
				orphan := vm.Owner != nil && !vm.Owner.Legacy && !tracked && vm.Lock == ""
				switch {
				case removed && vm.Owner == nil:
					rt.Fatalf("sweep %d removed foreign VM %s", step, vm.Ref.ID)
				case removed && vm.Owner.Legacy:
					rt.Fatalf("sweep %d removed VM %s marked by an older release", step, vm.Ref.ID)
				case removed && tracked:
					rt.Fatalf("sweep %d removed VM %s, which its claim tracks", step, vm.Ref.ID)
				case removed && vm.Lock != "":
					rt.Fatalf("sweep %d removed VM %s under lock %q", step, vm.Ref.ID, vm.Lock)
				case removed && now.Sub(*since) < grace:
					rt.Fatalf("sweep %d removed orphan %s after %s, grace %s", step, vm.Ref.ID, now.Sub(*since), grace)
				case orphan && !removed && now.Sub(*since) >= grace:
					rt.Fatalf("sweep %d kept orphan %s seen for %s, grace %s", step, vm.Ref.ID, now.Sub(*since), grace)
				}
			}
			for _, c := range plan.Retire {
				vm, ok := listed[c.VMID]
				switch {
				case c.Persistent || c.Warm || c.Deleting || c.Busy || !c.Started:
					rt.Fatalf("sweep %d retired claim %s that is not a started, idle, ephemeral runner: %+v", step, c.Name, c)
				case !ok:
					rt.Fatalf("sweep %d retired claim %s whose VM %q is not listed (it must be confirmed missing first)", step, c.Name, c.VMID)
				case vm.State != hypervisor.PowerStateStopped || vm.Lock != "":
					rt.Fatalf("sweep %d retired claim %s whose VM is %s (lock %q)", step, c.Name, vm.State, vm.Lock)
				}
				if owner, _ := trackedBy(vm, claims); owner.Name != c.Name || owner.Namespace != c.Namespace {
					rt.Fatalf("sweep %d retired claim %s/%s for VM %s, which is not its own", step, c.Namespace, c.Name, c.VMID)
				}
			}
			for _, c := range plan.Missing {
				if _, ok := listed[c.VMID]; ok || c.VMID == "" || c.Persistent || c.Warm || c.Deleting || c.Busy || !c.Started {
					rt.Fatalf("sweep %d reported claim %s missing: %+v", step, c.Name, c)
				}
			}
			for _, o := range plan.Observed {
				if !o.Claim.Persistent || o.Claim.VMID != o.VM.Ref.ID {
					rt.Fatalf("sweep %d observed VM %s for claim %+v", step, o.VM.Ref.ID, o.Claim)
				}
			}
			for _, a := range plan.Adopt {
				if a.VM.Owner == nil || !a.VM.Owner.Legacy || a.VM.Owner.LegacyClaimUID != a.Claim.UID || a.Claim.VMID != a.VM.Ref.ID ||
					a.VM.Owner.ClaimName != a.Claim.Name || a.VM.Owner.ClaimNamespace != a.Claim.Namespace {
					rt.Fatalf("sweep %d adopted VM %s for claim %+v", step, a.VM.Ref.ID, a.Claim)
				}
			}
			now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(rt, fmt.Sprint("wait", step))) * time.Second)
		}
	})
}
