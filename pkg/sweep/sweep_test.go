package sweep

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

func vm(id int, uid string, state hypervisor.PowerState) hypervisor.VM {
	v := hypervisor.VM{Ref: hypervisor.VMRef{Node: "pve1", ID: idOf(id)}, State: state}
	if uid != "" {
		v.Owner = &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: "ns", ClaimName: uid, ClaimID: uid}
	}
	return v
}

// legacyVM is a VM marked by a release before claim IDs for the claim with metadata.uid uid.
func legacyVM(id int, name, uid string, state hypervisor.PowerState) hypervisor.VM {
	return hypervisor.VM{Ref: hypervisor.VMRef{Node: "pve1", ID: idOf(id)}, State: state,
		Owner: &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: "ns", ClaimName: name, Legacy: true, LegacyClaimUID: uid}}
}

func TestDecide(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	grace := 5 * time.Minute
	running, stopped := hypervisor.PowerStateRunning, hypervisor.PowerStateStopped
	cases := []struct {
		name        string
		vms         []hypervisor.VM
		claims      []Claim
		seen        Orphans
		wantRetire  []string
		wantMissing []string
		wantOrphans []int
		wantAdopt   []int
		// wantOwned defaults to len(vms).
		wantOwned *int
	}{
		{
			name:   "running runner is left alone",
			vms:    []hypervisor.VM{vm(100, "a", running)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
		},
		{
			name:       "stopped runner is retired",
			vms:        []hypervisor.VM{vm(100, "a", stopped)},
			claims:     []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
			wantRetire: []string{"a"},
		},
		{
			name: "a warm VM, stopped and never booted, is left alone even if its status says started; a finished runner beside it is retired",
			vms:  []hypervisor.VM{vm(100, "warm", stopped), vm(101, "done", stopped), vm(102, "fresh", stopped)},
			claims: []Claim{
				{Namespace: "ns", Name: "warm", ID: "warm", UID: "uid-w", VMID: "100", Started: true, Warm: true},
				{Namespace: "ns", Name: "done", ID: "done", UID: "uid-d", VMID: "101", Started: true},
				{Namespace: "ns", Name: "fresh", ID: "fresh", UID: "uid-f", VMID: "102", Warm: true},
				{Namespace: "ns", Name: "gone", ID: "gone", UID: "uid-g", VMID: "103", Started: true, Warm: true},
			},
			wantRetire: []string{"done"},
		},
		{
			name: "a persistent claim's stopped VM is never retired, only observed",
			vms:  []hypervisor.VM{vm(100, "a", stopped), vm(101, "b", running)},
			claims: []Claim{
				{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true, Persistent: true},
				{Namespace: "ns", Name: "b", ID: "b", UID: "uid-b", VMID: "101", Started: true, Persistent: true},
			},
		},
		{
			name:   "a persistent claim whose VM is missing from the listing is not retired",
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true, Persistent: true}},
		},
		{
			name:   "stopped VM still being provisioned is not retired",
			vms:    []hypervisor.VM{vm(100, "a", stopped)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100"}},
		},
		{
			name:   "claim already deleting or busy is not retired again",
			vms:    []hypervisor.VM{vm(100, "a", stopped), vm(101, "b", stopped)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true, Deleting: true}, {Namespace: "ns", Name: "b", ID: "b", UID: "uid-b", VMID: "101", Started: true, Busy: true}},
		},
		{
			// A listing may be incomplete: the caller must confirm with a direct read.
			name:        "vanished VM is reported missing, not retired",
			claims:      []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
			wantMissing: []string{"a"},
		},
		{
			name:   "a VM in an unknown power state is not retired",
			vms:    []hypervisor.VM{vm(100, "a", hypervisor.PowerStateUnknown)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
		},
		{
			name: "new orphan waits for its grace period",
			vms:  []hypervisor.VM{vm(100, "gone", running)},
		},
		{
			name:        "old orphan is removed",
			vms:         []hypervisor.VM{vm(100, "gone", running)},
			seen:        Orphans{"100": now.Add(-grace)},
			wantOrphans: []int{100},
		},
		{
			name:   "a claim that lost its status keeps its VM",
			vms:    []hypervisor.VM{vm(100, "a", running)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-moved"}},
			seen:   Orphans{"100": now.Add(-grace)},
		},
		{
			name:        "a VM of a recreated claim (same name, new ID) is an orphan",
			vms:         []hypervisor.VM{vm(100, "a", running)},
			claims:      []Claim{{Namespace: "ns", Name: "a", ID: "b", UID: "uid-b", VMID: "100", Started: true}},
			seen:        Orphans{"100": now.Add(-grace)},
			wantOrphans: []int{100},
		},
		{
			name:      "a legacy VM its claim tracks is adopted",
			vms:       []hypervisor.VM{legacyVM(100, "a", "uid-a", running)},
			claims:    []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
			wantAdopt: []int{100},
		},
		{
			name:      "a legacy VM no claim tracks is never swept: it may be another installation's",
			vms:       []hypervisor.VM{legacyVM(100, "a", "uid-theirs", stopped), legacyVM(101, "b", "uid-b", running)},
			claims:    []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "100", Started: true}},
			seen:      Orphans{"100": now.Add(-grace), "101": now.Add(-grace)},
			wantOwned: ptrTo(0),
		},
		{
			name:   "a VM whose claim points elsewhere is not retired",
			vms:    []hypervisor.VM{vm(100, "a", stopped)},
			claims: []Claim{{Namespace: "ns", Name: "a", ID: "a", UID: "uid-a", VMID: "200"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			seen := tc.seen
			if seen == nil {
				seen = Orphans{}
			}
			plan := Decide(tc.vms, tc.claims, seen, now, grace)
			var retired []string
			for _, c := range plan.Retire {
				retired = append(retired, c.Name)
			}
			var orphans []int
			for _, v := range plan.RemoveOrphans {
				orphans = append(orphans, vmidOf(v.Ref.ID))
			}
			var missing []string
			for _, c := range plan.Missing {
				missing = append(missing, c.Name)
			}
			var adopted []int
			for _, a := range plan.Adopt {
				adopted = append(adopted, vmidOf(a.VM.Ref.ID))
			}
			g.Expect(retired).To(ConsistOf(toAny(tc.wantRetire)...))
			g.Expect(missing).To(ConsistOf(toAny(tc.wantMissing)...))
			g.Expect(orphans).To(ConsistOf(toAnyInt(tc.wantOrphans)...))
			g.Expect(adopted).To(ConsistOf(toAnyInt(tc.wantAdopt)...))
			wantOwned := len(tc.vms)
			if tc.wantOwned != nil {
				wantOwned = *tc.wantOwned
			}
			g.Expect(plan.Owned).To(Equal(wantOwned))
		})
	}
}

func TestOrphanMemoryForgetsVanishedVMs(t *testing.T) {
	g := NewWithT(t)
	seen := Orphans{}
	now := time.Now()
	Decide([]hypervisor.VM{vm(100, "gone", hypervisor.PowerStateRunning)}, nil, seen, now, time.Minute)
	g.Expect(seen).To(HaveKey("100"))
	Decide(nil, nil, seen, now.Add(time.Second), time.Minute)
	g.Expect(seen).To(BeEmpty())
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func toAnyInt(s []int) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func TestDecideObservesPersistentVMs(t *testing.T) {
	g := NewWithT(t)
	persistent := Claim{Namespace: "ns", Name: "db", ID: "db", UID: "uid-db", VMID: "100", Started: true, Persistent: true}
	deleting := Claim{Namespace: "ns", Name: "old", ID: "old", UID: "uid-old", VMID: "101", Started: true, Persistent: true, Deleting: true}
	plan := Decide([]hypervisor.VM{vm(100, "db", hypervisor.PowerStateStopped), vm(101, "old", hypervisor.PowerStateStopped)},
		[]Claim{persistent, deleting}, Orphans{}, time.Now(), time.Minute)
	g.Expect(plan.Retire).To(BeEmpty())
	g.Expect(plan.Missing).To(BeEmpty())
	g.Expect(plan.RemoveOrphans).To(BeEmpty())
	g.Expect(plan.Observed).To(HaveLen(1))
	g.Expect(plan.Observed[0].Claim.Name).To(Equal("db"))
	g.Expect(plan.Observed[0].VM.State).To(Equal(hypervisor.PowerStateStopped))
}
