// Package claimplacement turns MachineClaims and a HypervisorCluster into what pkg/placement
// weighs (the placement policy of spec.placement, the VMs already placed, memory reserved by VMs
// not yet running, the hosts with their labels, maintenance and allowed nodes, the hosts that lack
// a claim's PCI devices), for the MachineClaim controller, MachineMigration and the host drain.
package claimplacement

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// Policy is a persistent claim's spec.placement as the placement package reads it.
func Policy(c *infrav1.MachineClaim, memoryMiB int) (placement.Policy, error) {
	p := placement.Policy{MemoryMiB: memoryMiB}
	spec := c.Spec.Placement
	if spec == nil {
		return p, nil
	}
	convert := func(field string, s metav1.LabelSelector) (labels.Selector, error) {
		out, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			return nil, fmt.Errorf("spec.placement.%s: %w", field, err)
		}
		return out, nil
	}
	if spec.HostSelector != nil {
		sel, err := convert("hostSelector", *spec.HostSelector)
		if err != nil {
			return p, err
		}
		p.HostSelector = sel
	}
	for i, s := range spec.Affinity {
		sel, err := convert(fmt.Sprintf("affinity[%d]", i), s)
		if err != nil {
			return p, err
		}
		p.Affinity = append(p.Affinity, sel)
	}
	for i, s := range spec.AntiAffinity {
		sel, err := convert(fmt.Sprintf("antiAffinity[%d]", i), s)
		if err != nil {
			return p, err
		}
		p.AntiAffinity = append(p.AntiAffinity, sel)
	}
	return p, nil
}

// ClusterClaims lists the claims of a HypervisorCluster in a namespace, from the cache.
func ClusterClaims(ctx context.Context, c client.Client, namespace, hc string) ([]infrav1.MachineClaim, error) {
	list := &infrav1.MachineClaimList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{infrav1.HypervisorClusterNameLabel: hc}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PlacedVMs are the persistent VMs of claims that have a host (chosen or running), for affinity
// and anti-affinity. A VM being deleted still holds its host until it is gone.
func PlacedVMs(claims []infrav1.MachineClaim) []placement.PlacedVM {
	var out []placement.PlacedVM
	for i := range claims {
		c := &claims[i]
		if !c.Spec.IsPersistent() || c.Status.Node == "" {
			continue
		}
		out = append(out, placement.PlacedVM{Name: c.Name, Host: c.Status.Node, Labels: c.Labels, MemoryMiB: MemoryMiB(c)})
	}
	return out
}

// ReservedBy sums the memory of claims that have a host but no running VM yet, per host, leaving
// out self: the node's usage does not show them yet.
func ReservedBy(claims []infrav1.MachineClaim, self types.UID) map[string]int {
	reserved := map[string]int{}
	for _, other := range claims {
		if other.UID == self || other.Status.Node == "" || other.Status.CompletedStep == infrav1.StepStarted {
			continue
		}
		mem := int(other.Spec.MemoryMiB)
		if mem == 0 {
			mem = 2048
		}
		reserved[other.Status.Node] += mem
	}
	return reserved
}

// Hosts turns the hypervisor's nodes into the hosts persistent placement weighs: labels
// and maintenance from the HypervisorCluster's spec.hosts, free memory after reservations, and
// hosts outside allowedNodes left out with that reason.
func Hosts(hc *infrav1.HypervisorCluster, nodes []hypervisor.Node, reserved map[string]int) []placement.Host {
	declared := map[string]infrav1.HypervisorHost{}
	for _, h := range hc.Spec.Hosts {
		declared[h.Name] = h
	}
	hosts := make([]placement.Host, 0, len(nodes))
	for _, n := range nodes {
		h := placement.Host{Name: n.Name, Online: n.Online, Labels: declared[n.Name].Labels, Maintenance: declared[n.Name].Maintenance,
			FreeMiB: int(n.MemoryFree>>20) - reserved[n.Name]}
		if len(hc.Spec.AllowedNodes) > 0 && !slices.Contains(hc.Spec.AllowedNodes, n.Name) {
			h.Unavailable = "not in the HypervisorCluster's allowedNodes"
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// MemoryMiB is the claim's VM memory: what the hypervisor reported, else the spec's.
func MemoryMiB(c *infrav1.MachineClaim) int {
	if r := c.Status.Resources; r != nil && r.Memory.Allocated != nil {
		return int(r.Memory.Allocated.Value() >> 20)
	}
	return int(c.Spec.MemoryMiB)
}

// ReservedSince is ReservedBy plus the memory of VMs started since the node listing made at
// listedAt, which it does not show yet.
func ReservedSince(claims []infrav1.MachineClaim, self types.UID, listedAt time.Time) map[string]int {
	reserved := ReservedBy(claims, self)
	for i := range claims {
		other := &claims[i]
		// The condition's time has whole seconds: a second's margin counts a VM started just
		// before the listing too.
		if t, ok := StartedAt(other, self); ok && !t.Before(listedAt.Add(-time.Second)) {
			mem := MemoryMiB(other)
			if mem == 0 {
				mem = 2048
			}
			reserved[other.Status.Node] += mem
		}
	}
	return reserved
}

// StartedAt is when a claim other than self was recorded with its VM running on a host (its
// VMProvisioned condition's time, in whole seconds); ok is false for any other claim.
func StartedAt(c *infrav1.MachineClaim, self types.UID) (time.Time, bool) {
	if c.UID == self || c.Status.Node == "" || c.Status.CompletedStep != infrav1.StepStarted {
		return time.Time{}, false
	}
	started := conditions.Get(c, infrav1.MachineClaimVMProvisionedCondition)
	if started == nil || started.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	return started.LastTransitionTime.Time, true
}
