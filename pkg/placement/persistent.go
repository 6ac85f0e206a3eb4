package placement

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// ErrNoHost means no host satisfies a persistent VM's placement; the error says why each host was
// left out.
var ErrNoHost = errors.New("no host can take the VM")

// Host is a hypervisor host as persistent placement sees it: its labels and maintenance flag
// come from the HypervisorCluster, its free memory from the hypervisor.
type Host struct {
	Name   string
	Labels map[string]string
	Online bool
	// Maintenance hosts take no new VMs and are drained.
	Maintenance bool
	// FreeMiB is the memory left for new VMs.
	FreeMiB int
	// Unavailable, when set, is why the caller already knows the host cannot take the VM (not in
	// the allowed nodes, no copy of a linked clone's template, refused by the hypervisor): it is
	// reported like the policy's own reasons.
	Unavailable string
}

// PlacedVM is a persistent VM where it runs now.
type PlacedVM struct {
	Name   string
	Host   string
	Labels map[string]string
	// MemoryMiB is what the VM takes on its host.
	MemoryMiB int
}

// Policy is where a persistent VM may go.
type Policy struct {
	MemoryMiB int
	// HostSelector must match the host's labels; nil matches every host.
	HostSelector labels.Selector
	// Affinity: for each selector, the host must already run a VM it matches (other than the
	// VM placed).
	Affinity []labels.Selector
	// AntiAffinity: for each selector, the host must run no VM it matches (other than the VM
	// placed).
	AntiAffinity []labels.Selector
	// Exclude are hosts the VM may not go to (its current host when it moves).
	Exclude []string
	// HostReasons are hosts this VM cannot go to, with why (a passed-through device the host has
	// none of); they are reported like the policy's own reasons.
	HostReasons map[string]string
}

// rejection is why one host cannot take a VM.
func rejection(h Host, vms []PlacedVM, self string, p Policy) string {
	switch {
	case h.Unavailable != "":
		return h.Unavailable
	case !h.Online:
		return "offline"
	case h.Maintenance:
		return "in maintenance"
	case slices.Contains(p.Exclude, h.Name):
		return "excluded"
	case p.HostReasons[h.Name] != "":
		return p.HostReasons[h.Name]
	case p.HostSelector != nil && !p.HostSelector.Matches(labels.Set(h.Labels)):
		return "labels do not match hostSelector " + p.HostSelector.String()
	case h.FreeMiB < p.MemoryMiB:
		return fmt.Sprintf("%d MiB free, %d MiB needed", h.FreeMiB, p.MemoryMiB)
	}
	for _, sel := range p.AntiAffinity {
		for _, vm := range vms {
			if vm.Host == h.Name && vm.Name != self && sel.Matches(labels.Set(vm.Labels)) {
				return fmt.Sprintf("runs %s, which matches anti-affinity %s", vm.Name, sel)
			}
		}
	}
	for _, sel := range p.Affinity {
		found := false
		for _, vm := range vms {
			if vm.Host == h.Name && vm.Name != self && sel.Matches(labels.Set(vm.Labels)) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Sprintf("runs no VM matching affinity %s", sel)
		}
	}
	return ""
}

// ChooseHost returns the host for the persistent VM named self (empty for a new VM): among the
// hosts that are online, not in maintenance, not excluded, match the host selector, have the
// memory and satisfy the affinity and anti-affinity terms against vms, the one with the most free
// memory, ties by name. When none qualifies the error wraps ErrNoHost and names each host's
// reason.
func ChooseHost(hosts []Host, vms []PlacedVM, self string, p Policy) (string, error) {
	var (
		best    *Host
		reasons []string
	)
	sorted := append([]Host(nil), hosts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i := range sorted {
		h := &sorted[i]
		if why := rejection(*h, vms, self, p); why != "" {
			reasons = append(reasons, h.Name+": "+why)
			continue
		}
		if best == nil || h.FreeMiB > best.FreeMiB {
			best = h
		}
	}
	if best == nil {
		return "", fmt.Errorf("%w: %s", ErrNoHost, strings.Join(reasons, "; "))
	}
	return best.Name, nil
}

// Move is one step of a drain: a VM and the host it goes to.
type Move struct {
	VM, From, To string
}

// PlanDrain plans moving every VM off the host drain, one at a time, each with its policy
// (policies by VM name; a VM without one needs only its memory): each move is chosen with the
// VMs already moved on their new hosts and their memory taken, so two VMs that repel each other
// never land together and no host is filled past its free memory. VMs that cannot go anywhere
// are returned as stuck, with the reason, and stay where they are.
func PlanDrain(hosts []Host, vms []PlacedVM, drain string, policies map[string]Policy) (moves []Move, stuck map[string]error) {
	hs := append([]Host(nil), hosts...)
	placed := append([]PlacedVM(nil), vms...)
	for i := range hs {
		if hs[i].Name == drain {
			hs[i].Maintenance = true
		}
	}
	var leaving []int
	for i, vm := range placed {
		if vm.Host == drain {
			leaving = append(leaving, i)
		}
	}
	// The biggest VMs first, ties by name: they are the hardest to fit.
	sort.Slice(leaving, func(a, b int) bool {
		va, vb := placed[leaving[a]], placed[leaving[b]]
		if va.MemoryMiB != vb.MemoryMiB {
			return va.MemoryMiB > vb.MemoryMiB
		}
		return va.Name < vb.Name
	})
	for _, i := range leaving {
		vm := placed[i]
		p, ok := policies[vm.Name]
		if !ok {
			p = Policy{}
		}
		if p.MemoryMiB == 0 {
			p.MemoryMiB = vm.MemoryMiB
		}
		to, err := ChooseHost(hs, placed, vm.Name, p)
		if err != nil {
			if stuck == nil {
				stuck = map[string]error{}
			}
			stuck[vm.Name] = err
			continue
		}
		moves = append(moves, Move{VM: vm.Name, From: drain, To: to})
		placed[i].Host = to
		for j := range hs {
			if hs[j].Name == to {
				hs[j].FreeMiB -= p.MemoryMiB
			}
		}
	}
	return moves, stuck
}
