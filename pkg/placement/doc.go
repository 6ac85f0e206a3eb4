// Package placement chooses where a new VM goes: the node with the most free memory among the
// allowed ones (after memory already promised to VMs still being created) — for a linked clone,
// among the nodes holding a copy of its template — and a VMID candidate spread over the
// configured range so concurrent claims rarely propose the same ID.
//
// For persistent VMs it also holds the pure placement policy (ChooseHost): host selectors on the
// hosts' labels, affinity and anti-affinity between VMs by label, memory capacity and hosts in
// maintenance, each rejected host with its reason; and PlanDrain, which plans moving every VM off
// a host in maintenance one move at a time, so anti-affinity and capacity hold after each move,
// and DrainRetry, the bounded backoff by which a drain tries a failed move again.
//
// One level up, ChooseTarget picks which of a runner pool's targets (HypervisorClusters of any
// provider) the next runner goes to: by priority, then weight, skipping targets that are down,
// full or failing.
package placement
