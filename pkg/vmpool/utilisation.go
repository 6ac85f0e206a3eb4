package vmpool

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Utilisation is the pool's average resource use: used over allocated, summed over its running
// VMs that report both (the sweep refreshes them from one listing per hypervisor cluster). A
// resource no VM reports is nil.
type Utilisation struct {
	CPU, Memory *float64
	// VMs is how many VMs reported any figure.
	VMs int
}

// Measure averages the usage of claims that are running, Ready and not being deleted. A reading
// with no memory in use was taken while the VM was off (the hypervisor reports none for a stopped
// VM; the sweep refreshes figures at most once a minute) and counts as missing.
func Measure(claims []*infrav1.MachineClaim) Utilisation {
	var cpuUsed, cpuAlloc, memUsed, memAlloc float64
	var u Utilisation
	for _, c := range claims {
		if !c.DeletionTimestamp.IsZero() || c.Status.Resources == nil || c.Status.Phase != infrav1.MachineClaimPhaseRunning {
			continue
		}
		r := c.Status.Resources
		ready := meta.FindStatusCondition(c.Status.Conditions, infrav1.ReadyCondition)
		if ready == nil || ready.Status != metav1.ConditionTrue || r.Memory.Used == nil || r.Memory.Used.IsZero() {
			continue
		}
		counted := false
		if r.CPU.Allocated != nil && r.CPU.Used != nil && !r.CPU.Allocated.IsZero() {
			cpuUsed += r.CPU.Used.AsApproximateFloat64()
			cpuAlloc += r.CPU.Allocated.AsApproximateFloat64()
			counted = true
		}
		if r.Memory.Allocated != nil && r.Memory.Used != nil && !r.Memory.Allocated.IsZero() {
			memUsed += r.Memory.Used.AsApproximateFloat64()
			memAlloc += r.Memory.Allocated.AsApproximateFloat64()
			counted = true
		}
		if counted {
			u.VMs++
		}
	}
	if cpuAlloc > 0 {
		v := cpuUsed / cpuAlloc
		u.CPU = &v
	}
	if memAlloc > 0 {
		v := memUsed / memAlloc
		u.Memory = &v
	}
	return u
}
