package vmpool

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

func claimUsing(phase infrav1.MachineClaimPhase, cpuUsed, cpuCores, memUsed, memAlloc string) *infrav1.MachineClaim {
	q := func(s string) *resource.Quantity {
		if s == "" {
			return nil
		}
		return ptr.To(resource.MustParse(s))
	}
	c := &infrav1.MachineClaim{}
	c.Status.Phase = phase
	c.Status.Conditions = []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
	c.Status.Resources = &infrav1.MachineResourceUsage{
		CPU:          infrav1.ResourceUsage{Used: q(cpuUsed), Allocated: q(cpuCores)},
		Memory:       infrav1.ResourceUsage{Used: q(memUsed), Allocated: q(memAlloc)},
		ObservedTime: ptr.To(metav1.NewTime(t0.Add(time.Minute))),
	}
	return c
}

// TestMeasure: use is summed over running VMs and divided by what they were given, so a big VM
// weighs more than a small one; stopped, provisioning, not Ready and deleting VMs, missing figures
// and readings taken while the VM was off (no memory in use) do not count.
func TestMeasure(t *testing.T) {
	g := NewWithT(t)
	deleting := claimUsing(infrav1.MachineClaimPhaseRunning, "4", "4", "4Gi", "4Gi")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	stale := claimUsing(infrav1.MachineClaimPhaseRunning, "0", "2", "0", "2Gi")
	notReady := claimUsing(infrav1.MachineClaimPhaseRunning, "0", "2", "0", "2Gi")
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	u := Measure([]*infrav1.MachineClaim{
		stale, notReady,
		claimUsing(infrav1.MachineClaimPhaseRunning, "1", "2", "1Gi", "4Gi"),
		claimUsing(infrav1.MachineClaimPhaseRunning, "500m", "2", "3Gi", "4Gi"),
		claimUsing(infrav1.MachineClaimPhaseRunning, "", "4", "1Gi", ""),
		claimUsing(infrav1.MachineClaimPhaseStopped, "0", "8", "0", "8Gi"),
		claimUsing(infrav1.MachineClaimPhaseProvisioning, "2", "2", "2Gi", "2Gi"),
		deleting,
		{},
	})
	g.Expect(u.VMs).To(Equal(2))
	g.Expect(*u.CPU).To(BeNumerically("~", 1.5/4, 1e-9))
	g.Expect(*u.Memory).To(BeNumerically("~", 0.5, 1e-9))

	g.Expect(Measure(nil)).To(Equal(Utilisation{}), "no running VM: no figures")
}
