package hypervisorcluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// usageRefreshInterval bounds how often a persistent claim's resource usage is written when
// nothing else about its VM changed: usage moves all the time, and one status write per VM per
// sweep would load the API server for nothing.
const usageRefreshInterval = time.Minute

// observe refreshes a persistent claim's power state and resource usage from the sweep's one
// listing. A change of power state wakes the claim's controller (the status update is an event),
// which applies the run strategy; the sweep itself never stops, starts or deletes such a VM.
func (s *Sweeper) observe(ctx context.Context, claim *infrav1.MachineClaim, vm hypervisor.VM) error {
	if claim == nil || vm.Lock != "" {
		return nil
	}
	stateChanged := claim.Status.PowerState != string(vm.State)
	r := claim.Status.Resources
	// The claim's controller records the power state of a VM it starts itself, so a start is not
	// always a change of state here: a reading taken while the VM was off (no memory in use) is
	// replaced as soon as the VM uses memory, not a minute later (VM pools scale on these figures).
	offReading := r != nil && (r.Memory.Used == nil || r.Memory.Used.IsZero()) && vm.Usage.MemoryUsedBytes > 0
	if !stateChanged && !offReading && r != nil && r.ObservedTime != nil && time.Since(r.ObservedTime.Time) < usageRefreshInterval {
		return nil
	}
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Status.PowerState = string(vm.State)
	if vm.State == hypervisor.PowerStateRunning {
		// Running again: the next stop is a new one, whose cause the claim's controller reads.
		claim.Status.LastStopCause = ""
	}
	claim.Status.Resources = resourceUsage(vm.Usage, time.Now())
	if err := s.Client.Status().Patch(ctx, claim, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("refreshing MachineClaim %s: %w", claim.Name, err))
	}
	return nil
}

// resourceUsage turns a listing's figures into a claim's status. CPU is in cores, with the used
// share rounded to millicores; memory and disk in bytes.
func resourceUsage(u hypervisor.Usage, now time.Time) *infrav1.MachineResourceUsage {
	bytes := func(n uint64) *resource.Quantity { return resource.NewQuantity(int64(n), resource.BinarySI) }
	return &infrav1.MachineResourceUsage{
		CPU: infrav1.ResourceUsage{
			Allocated: resource.NewQuantity(int64(u.CPUs), resource.DecimalSI),
			Used:      resource.NewMilliQuantity(int64(u.CPULoad*float64(u.CPUs)*1000+0.5), resource.DecimalSI),
		},
		Memory:       infrav1.ResourceUsage{Allocated: bytes(u.MemoryBytes), Used: bytes(u.MemoryUsedBytes)},
		Disk:         infrav1.ResourceUsage{Allocated: bytes(u.DiskBytes), Used: bytes(u.DiskUsedBytes)},
		ObservedTime: &metav1.Time{Time: now},
	}
}
