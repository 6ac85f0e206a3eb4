package sweep

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

func vm(id int, uid string, state hypervisor.PowerState) hypervisor.VM {
	v := hypervisor.VM{Ref: hypervisor.VMRef{Node: "pve1", ID: id}, State: state}
	if uid != "" {
		v.Owner = &hypervisor.Ownership{Cluster: "ns/hc", ClaimNamespace: "ns", ClaimName: "c-" + uid, ClaimUID: uid}
	}
	return v
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
		wantOrphans []int
	}{
		{
			name:   "running runner is left alone",
			vms:    []hypervisor.VM{vm(100, "a", running)},
			claims: []Claim{{Name: "a", UID: "a", VMID: 100, Started: true}},
		},
		{
			name:       "stopped runner is retired",
			vms:        []hypervisor.VM{vm(100, "a", stopped)},
			claims:     []Claim{{Name: "a", UID: "a", VMID: 100, Started: true}},
			wantRetire: []string{"a"},
		},
		{
			name:   "stopped VM still being provisioned is not retired",
			vms:    []hypervisor.VM{vm(100, "a", stopped)},
			claims: []Claim{{Name: "a", UID: "a", VMID: 100}},
		},
		{
			name:   "claim already deleting or busy is not retired again",
			vms:    []hypervisor.VM{vm(100, "a", stopped), vm(101, "b", stopped)},
			claims: []Claim{{Name: "a", UID: "a", VMID: 100, Started: true, Deleting: true}, {Name: "b", UID: "b", VMID: 101, Started: true, Busy: true}},
		},
		{
			name:       "vanished VM retires its claim",
			claims:     []Claim{{Name: "a", UID: "a", VMID: 100, Started: true}},
			wantRetire: []string{"a"},
		},
		{
			name: "new orphan waits for its grace period",
			vms:  []hypervisor.VM{vm(100, "gone", running)},
		},
		{
			name:        "old orphan is removed",
			vms:         []hypervisor.VM{vm(100, "gone", running)},
			seen:        Orphans{100: now.Add(-grace)},
			wantOrphans: []int{100},
		},
		{
			name:   "a VM whose claim points elsewhere is not retired",
			vms:    []hypervisor.VM{vm(100, "a", stopped)},
			claims: []Claim{{Name: "a", UID: "a", VMID: 200}},
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
				orphans = append(orphans, v.Ref.ID)
			}
			g.Expect(retired).To(ConsistOf(toAny(tc.wantRetire)...))
			g.Expect(orphans).To(ConsistOf(toAnyInt(tc.wantOrphans)...))
			g.Expect(plan.Owned).To(Equal(len(tc.vms)))
		})
	}
}

func TestOrphanMemoryForgetsVanishedVMs(t *testing.T) {
	g := NewWithT(t)
	seen := Orphans{}
	now := time.Now()
	Decide([]hypervisor.VM{vm(100, "gone", hypervisor.PowerStateRunning)}, nil, seen, now, time.Minute)
	g.Expect(seen).To(HaveKey(100))
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
