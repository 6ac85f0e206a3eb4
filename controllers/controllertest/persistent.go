package controllertest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// PersistentVM starts a manager and a simulator and provisions a standalone persistent claim,
// returning once its VM runs.
func PersistentVM(t *testing.T, strategy infrav1.RunStrategy, mutate ...func(*builder.MachineClaimBuilder)) (*infrav1.MachineClaim, *pvesim.Simulator) {
	t.Helper()
	return PersistentVMWith(t, Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second}, strategy, mutate...)
}

// PersistentVMWith is PersistentVM with the manager's timing (and clock) chosen by the test.
func PersistentVMWith(t *testing.T, tm Timing, strategy infrav1.RunStrategy, mutate ...func(*builder.MachineClaimBuilder)) (*infrav1.MachineClaim, *pvesim.Simulator) {
	t.Helper()
	return PersistentVMIn(t, pvesim.Config{}, tm, strategy, mutate...)
}

// PersistentVMIn is PersistentVMWith on a simulator configured by the test.
func PersistentVMIn(t *testing.T, cfg pvesim.Config, tm Timing, strategy infrav1.RunStrategy, mutate ...func(*builder.MachineClaimBuilder)) (*infrav1.MachineClaim, *pvesim.Simulator) {
	t.Helper()
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, cfg)
	StartManager(t, tm)
	ns := NewNamespace(t)
	ProxmoxCluster(t, ns, "pve", sim)
	b := builder.NewMachineClaim("db-0", ns).WithHypervisorCluster("pve").WithPersistent(strategy)
	for _, m := range mutate {
		m(b)
	}
	claim := b.Build()
	g.Expect(Env.Client.Create(context.Background(), claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := Get(g, claim)
		g.Expect(got.Status.VMID).NotTo(BeZero())
		g.Expect(got.Status.Initialization).NotTo(BeNil())
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed())
	return claim, sim
}

// VMStatus is the simulator's power state of the claim's VM, "gone" when it does not exist.
func VMStatus(sim *pvesim.Simulator, claim *infrav1.MachineClaim) func() string {
	return func() string {
		vm, ok := sim.VM(VMIDOf(claim.Status.VMID))
		if !ok {
			return "gone"
		}
		return vm.Status
	}
}

// StaysOff asserts the claim's VM stays stopped and the claim (and its VM) stay, for a few sweeps.
func StaysOff(t *testing.T, sim *pvesim.Simulator, claim *infrav1.MachineClaim, why string) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		got := &infrav1.MachineClaim{}
		g.Expect(Env.Client.Get(context.Background(), KeyOf(claim), got)).To(Succeed(), why)
		g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), why+": the sweep never deletes a persistent claim")
		g.Expect(VMStatus(sim, claim)()).To(Equal("stopped"), why)
	}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
}

// IDOf is a Proxmox VMID as a VM ID.
func IDOf(vmid int) string { return strconv.Itoa(vmid) }

// VMIDOf is the VMID of a Proxmox VM ID, for the simulator's calls; 0 while there is none.
func VMIDOf(id string) int {
	if id == "" {
		return 0
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		panic(fmt.Sprintf("VM ID %q is not a VMID", id))
	}
	return n
}

// OnSharedStorage moves the VM's disk to shared storage, as an administrator would.
func OnSharedStorage(g Gomega, sim *pvesim.Simulator, claim *infrav1.MachineClaim) {
	g.Expect(sim.SetVMConfig(VMIDOf(claim.Status.VMID), "scsi0", "ceph:vm-"+claim.Status.VMID+"-disk-0,size=32G")).To(Succeed())
}

// MigrationDone waits for a migration to end and returns it.
func MigrationDone(g Gomega, m *fleetv1.MachineMigration) *fleetv1.MachineMigration {
	g.Eventually(func() fleetv1.MachineMigrationPhase { return Get(g, m).Status.Phase }, 60*time.Second, 100*time.Millisecond).
		Should(BeElementOf(fleetv1.MachineMigrationPhaseSucceeded, fleetv1.MachineMigrationPhaseFailed))
	return Get(g, m)
}
