package vmpool

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// vms builds VMs from a compact spec: o/n for outdated/updated, then r (ready and available),
// u (ready, not yet available), - (not ready) and an optional d (deleting). They are created a
// minute apart in the order given.
func vms(specs ...string) []VM {
	out := make([]VM, len(specs))
	for i, s := range specs {
		vm := VM{Name: fmt.Sprintf("vm%d", i), Created: t0.Add(time.Duration(i) * time.Minute), Updated: s[0] == 'n'}
		switch s[1] {
		case 'r':
			vm.Ready, vm.Available = true, true
		case 'u':
			vm.Ready = true
		}
		vm.Deleting = len(s) > 2 && s[2] == 'd'
		out[i] = vm
	}
	return out
}

func TestResolveStrategy(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	for _, tc := range []struct {
		name     string
		s        fleetv1.VMPoolStrategy
		replicas int
		want     Strategy
	}{
		{"defaults are MachineDeployment's", fleetv1.VMPoolStrategy{}, 3, Strategy{MaxSurge: 1}},
		{"recreate", fleetv1.VMPoolStrategy{Type: fleetv1.RecreateVMPoolStrategy}, 3, Strategy{Recreate: true}},
		{"numbers", fleetv1.VMPoolStrategy{RollingUpdate: &fleetv1.VMPoolRollingUpdate{MaxSurge: num(2), MaxUnavailable: num(1)}}, 5, Strategy{MaxSurge: 2, MaxUnavailable: 1}},
		{"surge rounds up, unavailable down", fleetv1.VMPoolStrategy{RollingUpdate: &fleetv1.VMPoolRollingUpdate{MaxSurge: pct("25%"), MaxUnavailable: pct("25%")}}, 10, Strategy{MaxSurge: 3, MaxUnavailable: 2}},
		{"both rounding to zero allow one unavailable", fleetv1.VMPoolStrategy{RollingUpdate: &fleetv1.VMPoolRollingUpdate{MaxSurge: pct("0%"), MaxUnavailable: pct("10%")}}, 3, Strategy{MaxUnavailable: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ResolveStrategy(tc.s, tc.replicas)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
	_, err := ResolveStrategy(fleetv1.VMPoolStrategy{RollingUpdate: &fleetv1.VMPoolRollingUpdate{MaxSurge: pct("lots")}}, 3)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("maxSurge")))
}

func TestPlanRollout(t *testing.T) {
	surge1 := Strategy{MaxSurge: 1}
	unavail1 := Strategy{MaxUnavailable: 1}
	for _, tc := range []struct {
		name       string
		replicas   int
		s          Strategy
		vms        []VM
		wantCreate int
		wantDelete []string
	}{
		{"empty pool is created up to replicas within surge", 3, surge1, nil, 3, nil},
		{"steady pool does nothing", 3, surge1, vms("nr", "nr", "nr"), 0, nil},
		{"template change surges one first", 3, surge1, vms("or", "or", "or"), 1, nil},
		{"new VM not ready yet: wait", 3, surge1, vms("or", "or", "or", "n-"), 0, nil},
		{"new VM available: newest outdated goes", 3, surge1, vms("or", "or", "or", "nr"), 0, []string{"vm2"}},
		{"an outdated VM still deleting holds the surge", 3, surge1, vms("ord", "or", "or", "nr"), 0, nil},
		{"once it is gone the next new one comes", 3, surge1, vms("or", "or", "nr"), 1, nil},
		{"ready but not yet available does not count", 3, surge1, vms("or", "or", "or", "nu"), 0, nil},
		{"maxUnavailable 1 without surge deletes first", 3, unavail1, vms("or", "or", "or"), 0, []string{"vm2"}},
		{"then creates in the freed place", 3, unavail1, vms("or", "or"), 1, nil},
		{"outdated VMs that are down go at once", 3, surge1, vms("o-", "or", "or", "or"), 0, []string{"vm0"}},
		{"scale down removes not ready first, then newest", 2, surge1, vms("nr", "n-", "nr", "nr"), 0, []string{"vm1", "vm3"}},
		{"scale down prefers outdated over updated", 2, surge1, vms("nr", "or", "nr"), 0, []string{"vm1"}},
		{"scale to zero removes all", 0, surge1, vms("nr", "nr"), 0, []string{"vm1", "vm0"}},
		{"scale up adds within surge", 5, surge1, vms("nr", "nr", "nr"), 2, nil},
		{"scale up counts deleting VMs against surge", 5, surge1, vms("nr", "nr", "nrd", "nrd", "nrd"), 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := PlanRollout(tc.replicas, tc.s, tc.vms)
			g.Expect(p.Create).To(Equal(tc.wantCreate))
			g.Expect(p.Delete).To(Equal(tc.wantDelete))
		})
	}
}

func TestPlanRecreate(t *testing.T) {
	rc := Strategy{Recreate: true}
	g := NewWithT(t)
	p := PlanRollout(3, rc, vms("or", "or", "o-"))
	g.Expect(p.Create).To(BeZero())
	g.Expect(p.Delete).To(ConsistOf("vm0", "vm1", "vm2"), "every outdated VM goes at once")
	p = PlanRollout(3, rc, vms("ord", "ord"))
	g.Expect(p).To(Equal(Plan{}), "nothing is created while an outdated VM is still being deleted")
	p = PlanRollout(3, rc, nil)
	g.Expect(p.Create).To(Equal(3))
	p = PlanRollout(1, rc, vms("nr", "n-", "nr"))
	g.Expect(p.Delete).To(Equal([]string{"vm1", "vm2"}))
}

func TestTemplateHash(t *testing.T) {
	g := NewWithT(t)
	spec := infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{ID: "9000"}, Cores: 2}
	a, err := TemplateHash(&spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(a)).To(BeNumerically("<=", 10))
	g.Expect(a).To(MatchRegexp(`^[bcdfghjklmnpqrstvwxz2456789]+$`))
	b, _ := TemplateHash(spec.DeepCopy())
	g.Expect(b).To(Equal(a), "stable")
	spec.Cores = 4
	c, _ := TemplateHash(&spec)
	g.Expect(c).NotTo(Equal(a), "a spec change changes the hash")
	spec.Cores, spec.MemoryMiB = 2, 0
	spec.TerminationGracePeriodSeconds = ptr.To[int32](5)
	d, _ := TemplateHash(&spec)
	g.Expect(d).NotTo(Equal(a))
}

// drawPool draws any pool state: VMs outdated or updated, ready, available, deleting.
func drawPool(rt *rapid.T) []VM {
	n := rapid.IntRange(0, 12).Draw(rt, "n")
	out := make([]VM, n)
	for i := range out {
		ready := rapid.Bool().Draw(rt, fmt.Sprint("ready", i))
		out[i] = VM{
			Name:      fmt.Sprint("vm", i),
			Created:   t0.Add(time.Duration(rapid.IntRange(0, 100).Draw(rt, fmt.Sprint("age", i))) * time.Second),
			Updated:   rapid.Bool().Draw(rt, fmt.Sprint("updated", i)),
			Ready:     ready,
			Available: ready && rapid.Bool().Draw(rt, fmt.Sprint("available", i)),
			Deleting:  rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("deleting", i)) == 0,
		}
	}
	return out
}

func drawStrategy(rt *rapid.T) Strategy {
	s := Strategy{MaxSurge: rapid.IntRange(0, 4).Draw(rt, "surge"), MaxUnavailable: rapid.IntRange(0, 4).Draw(rt, "unavailable")}
	if s.MaxSurge == 0 && s.MaxUnavailable == 0 {
		s.MaxUnavailable = 1
	}
	return s
}

// TestPlanRespectsBounds: for any pool state the plan never creates beyond replicas + maxSurge
// VMs in existence, never deletes an available VM below replicas - maxUnavailable available,
// deletes only live VMs, each once, and under Recreate never creates beside an outdated VM.
func TestPlanRespectsBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pool := drawPool(rt)
		replicas := rapid.IntRange(0, 10).Draw(rt, "replicas")
		s := drawStrategy(rt)
		s.Recreate = rapid.IntRange(0, 3).Draw(rt, "recreate") == 0
		p := PlanRollout(replicas, s, pool)
		c := Count(pool)
		byName := map[string]VM{}
		for _, vm := range pool {
			byName[vm.Name] = vm
		}
		seen := map[string]bool{}
		lostAvailable := 0
		for _, name := range p.Delete {
			vm, ok := byName[name]
			if !ok || vm.Deleting || seen[name] {
				rt.Fatalf("deletes %s: unknown, already deleting or twice (%+v)", name, p)
			}
			seen[name] = true
			if vm.Available {
				lostAvailable++
			}
		}
		if p.Create < 0 {
			rt.Fatalf("negative create %d", p.Create)
		}
		if s.Recreate {
			if p.Create > 0 && c.Existing != c.Updated+countDeletingUpdated(pool) {
				rt.Fatalf("Recreate creates %d beside outdated VMs", p.Create)
			}
			return
		}
		if p.Create > 0 && c.Existing+p.Create > replicas+s.MaxSurge {
			rt.Fatalf("%d exist, creating %d exceeds replicas %d + maxSurge %d", c.Existing, p.Create, replicas, s.MaxSurge)
		}
		if floor := replicas - s.MaxUnavailable; lostAvailable > 0 && c.Available-lostAvailable < floor {
			rt.Fatalf("%d available, deleting %d of them drops below replicas %d - maxUnavailable %d", c.Available, lostAvailable, replicas, s.MaxUnavailable)
		}
		if c.Updated+p.Create > max(replicas, c.Updated) {
			rt.Fatalf("creates %d with %d updated for %d replicas", p.Create, c.Updated, replicas)
		}
	})
}

func countDeletingUpdated(pool []VM) int {
	n := 0
	for _, vm := range pool {
		if vm.Deleting && vm.Updated {
			n++
		}
	}
	return n
}

// TestRolloutConvergesWithinBounds runs whole rolling updates: from a pool of outdated VMs, plans
// are applied while new VMs become ready and deletions finish in any order. At every step the VMs
// in existence stay within replicas + maxSurge and the available ones never drop below
// replicas - maxUnavailable; when every VM eventually becomes ready the pool ends with replicas
// updated VMs and nothing else.
func TestRolloutConvergesWithinBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		replicas := rapid.IntRange(1, 8).Draw(rt, "replicas")
		s := drawStrategy(rt)
		pool := make([]VM, replicas)
		for i := range pool {
			pool[i] = VM{Name: fmt.Sprint("old", i), Created: t0, Ready: true, Available: true}
		}
		seq := 0
		check := func(step string) {
			c := Count(pool)
			if c.Existing > replicas+s.MaxSurge {
				rt.Fatalf("%s: %d VMs exist, above %d + %d", step, c.Existing, replicas, s.MaxSurge)
			}
			if c.Available < replicas-s.MaxUnavailable {
				rt.Fatalf("%s: %d available, below %d - %d", step, c.Available, replicas, s.MaxUnavailable)
			}
		}
		for step := 0; step < 200; step++ {
			p := PlanRollout(replicas, s, pool)
			del := map[string]bool{}
			for _, n := range p.Delete {
				del[n] = true
			}
			for i := range pool {
				if del[pool[i].Name] {
					pool[i].Deleting, pool[i].Ready, pool[i].Available = true, false, false
				}
			}
			for range p.Create {
				seq++
				pool = append(pool, VM{Name: fmt.Sprint("new", seq), Created: t0.Add(time.Duration(seq) * time.Second), Updated: true})
			}
			check(fmt.Sprint("after plan ", step))
			// The world moves: a deletion finishes or a new VM becomes available, in any order.
			if len(pool) > 0 {
				i := rapid.IntRange(0, len(pool)-1).Draw(rt, fmt.Sprint("moves", step))
				switch {
				case pool[i].Deleting:
					pool = append(pool[:i], pool[i+1:]...)
				case !pool[i].Available:
					pool[i].Ready, pool[i].Available = true, true
				}
			}
			check(fmt.Sprint("after world ", step))
			c := Count(pool)
			if c.Existing == replicas && c.Updated == replicas && c.Available == replicas {
				return
			}
		}
		// Rapid may keep picking VMs that do not move; finish deterministically.
		for step := 0; step < 100; step++ {
			p := PlanRollout(replicas, s, pool)
			del := map[string]bool{}
			for _, n := range p.Delete {
				del[n] = true
			}
			var next []VM
			for _, vm := range pool {
				if !del[vm.Name] && !vm.Deleting {
					vm.Ready, vm.Available = true, true
					next = append(next, vm)
				}
			}
			pool = next
			for range p.Create {
				seq++
				pool = append(pool, VM{Name: fmt.Sprint("new", seq), Updated: true})
			}
			check(fmt.Sprint("finishing ", step))
		}
		c := Count(pool)
		if c.Existing != replicas || c.Updated != replicas {
			rt.Fatalf("did not converge: %+v", c)
		}
	})
}
