package vmpool

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// VM is one of a pool's MachineClaims as the planner sees it.
type VM struct {
	Name    string
	Created time.Time
	// Updated: made from the pool's current template.
	Updated bool
	// Ready: the claim's Ready condition is True.
	Ready bool
	// Available: Ready for at least minReadySeconds.
	Available bool
	// Deleting: the claim is being deleted; its VM may still exist.
	Deleting bool
}

// Strategy is a pool's update strategy with its bounds resolved to numbers of VMs.
type Strategy struct {
	Recreate       bool
	MaxSurge       int
	MaxUnavailable int
}

// MachineDeployment's defaults for a rolling update.
var (
	DefaultMaxSurge       = intstr.FromInt32(1)
	DefaultMaxUnavailable = intstr.FromInt32(0)
)

// ResolveStrategy turns spec.strategy into numbers for a pool of replicas VMs: maxSurge as a
// percentage rounds up, maxUnavailable rounds down, and when both come to 0 maxUnavailable is 1
// (as MachineDeployment does), so an update can always make progress.
func ResolveStrategy(s fleetv1.VMPoolStrategy, replicas int) (Strategy, error) {
	if s.Type == fleetv1.RecreateVMPoolStrategy {
		return Strategy{Recreate: true}, nil
	}
	surge, unavailable := DefaultMaxSurge, DefaultMaxUnavailable
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			surge = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			unavailable = *ru.MaxUnavailable
		}
	}
	ms, err := intstr.GetScaledValueFromIntOrPercent(&surge, replicas, true)
	if err != nil {
		return Strategy{}, fmt.Errorf("maxSurge: %w", err)
	}
	mu, err := intstr.GetScaledValueFromIntOrPercent(&unavailable, replicas, false)
	if err != nil {
		return Strategy{}, fmt.Errorf("maxUnavailable: %w", err)
	}
	if ms < 0 || mu < 0 {
		return Strategy{}, fmt.Errorf("maxSurge %d and maxUnavailable %d must not be negative", ms, mu)
	}
	if ms == 0 && mu == 0 {
		mu = 1
	}
	return Strategy{MaxSurge: ms, MaxUnavailable: mu}, nil
}

// Plan is what one reconcile of a pool does.
type Plan struct {
	// Create is how many claims to create from the current template.
	Create int
	// Delete names the claims to delete, in the order chosen.
	Delete []string
}

// Counts summarises a pool's VMs; deleting VMs count in Existing only.
type Counts struct {
	Existing, Live, Updated, Ready, Available, Outdated int
}

// Count summarises vms.
func Count(vms []VM) Counts {
	c := Counts{Existing: len(vms)}
	for _, vm := range vms {
		if vm.Deleting {
			continue
		}
		c.Live++
		if vm.Updated {
			c.Updated++
		} else {
			c.Outdated++
		}
		if vm.Ready {
			c.Ready++
		}
		if vm.Available {
			c.Available++
		}
	}
	return c
}

// PlanRollout decides which claims to create and delete to bring vms to replicas VMs of the
// current template.
//
// RollingUpdate: VMs that exist, those being deleted included (their VMs may still run), never
// exceed replicas + maxSurge because of a creation, and the plan never deletes an available VM
// that would leave fewer than replicas - maxUnavailable available. Outdated VMs that are not
// available go first (removing them costs no availability), then outdated available ones as far as
// the availability budget allows, then, when more updated VMs exist than wanted, the surplus in
// DeletionOrder.
//
// Recreate: every outdated VM is deleted, and no new one is created until none exists any more,
// not even one still being deleted.
func PlanRollout(replicas int, s Strategy, vms []VM) Plan {
	replicas = max(replicas, 0)
	c := Count(vms)
	ordered := DeletionOrder(vms)
	var plan Plan
	if s.Recreate {
		oldExists := false
		for _, vm := range ordered {
			if vm.Updated {
				continue
			}
			oldExists = true
			if !vm.Deleting {
				plan.Delete = append(plan.Delete, vm.Name)
			}
		}
		if oldExists {
			return plan
		}
		plan.Create = max(replicas-c.Updated, 0)
		surplus := c.Updated - replicas
		for _, vm := range ordered {
			if surplus <= 0 {
				break
			}
			if !vm.Deleting {
				plan.Delete = append(plan.Delete, vm.Name)
				surplus--
			}
		}
		return plan
	}

	if want := replicas - c.Updated; want > 0 {
		plan.Create = max(min(want, replicas+s.MaxSurge-c.Existing), 0)
	}
	budget := c.Available - max(replicas-s.MaxUnavailable, 0)
	surplus := c.Updated - replicas
	for _, vm := range ordered {
		if vm.Deleting {
			continue
		}
		if vm.Updated {
			if surplus <= 0 {
				continue
			}
			if vm.Available {
				if budget <= 0 {
					continue
				}
				budget--
			}
			surplus--
			plan.Delete = append(plan.Delete, vm.Name)
			continue
		}
		if vm.Available {
			if budget <= 0 {
				continue
			}
			budget--
		}
		plan.Delete = append(plan.Delete, vm.Name)
	}
	return plan
}

// DeletionOrder sorts vms in the order a pool removes them: those not Ready first, then outdated
// ones, then the newest; names break ties so the order is stable.
func DeletionOrder(vms []VM) []VM {
	out := slices.Clone(vms)
	rank := func(vm VM) int {
		switch {
		case !vm.Ready:
			return 0
		case !vm.Updated:
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(out, func(a, b VM) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
