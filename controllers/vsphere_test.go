package controllers_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/vmware/govmomi/vim25/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// maxVSphereCallsPerVM is the bar of the SOAP calls one VM's whole life costs on vSphere through
// the controllers (the health check and sweep left out), as TestCallsPerVMEndToEnd holds Proxmox to
// its own.
const maxVSphereCallsPerVM = 30

// TestVSphereClaimLifecycle runs a MachineClaim's whole life on vSphere through the real manager
// and VMware's simulator: the HypervisorCluster connects and reports the compute cluster's hosts,
// the claim's VM is cloned from the template with the installation's marks, configured with the
// bootstrap data as guestinfo, started and given an address by VMware Tools; deleting the claim
// stops and destroys the VM, and the simulator's other VM is never touched. It counts the SOAP
// calls of that life, by method, with the health checks a minute apart so that none falls inside.
func TestVSphereClaimLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	startManager(t, testTiming{Sweep: time.Minute, OrphanGrace: time.Minute})
	ns := newNamespace(t)
	hc := controllertest.VSphereCluster(t, ns, "vc", sim)
	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		g.Expect(conditions.IsTrue(got, infrav1.HypervisorClusterAvailableCondition)).To(BeTrue(), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.Nodes).To(Equal(int32(3)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	bootstrapSecret(t, ns, "vm-v-userdata", controllertest.UserData)
	sim.ResetCalls()
	claim := builder.NewMachineClaim("vm-v", ns).WithHypervisorCluster("vc").WithTemplateName("ubuntu-2404-runner", "runner").
		WithBootstrapSecret("vm-v-userdata").WithResources(2, 2048).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "conditions: %+v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	got := get(g, claim)
	g.Expect(got.Status.VMID).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`))
	g.Expect(got.Spec.ProviderID).To(HaveSuffix("/" + got.Status.VMID))
	g.Expect(got.Status.Addresses).NotTo(BeEmpty())
	var vm vspheresim.VM
	for _, v := range sim.VMs() {
		if v.InstanceUUID == got.Status.VMID {
			vm = v
		}
	}
	g.Expect(vm.PowerState).To(BeEquivalentTo("poweredOn"))
	g.Expect(vm.Host).To(Equal(got.Status.Node))
	g.Expect(vm.ExtraConfig).To(HaveKeyWithValue("hyperfleet.claim", ns+"/vm-v"))
	g.Expect(vm.ExtraConfig).To(HaveKeyWithValue("hyperfleet.installation", get(g, hc).Spec.InstallationID))
	userData, err := base64.StdEncoding.DecodeString(vm.ExtraConfig["guestinfo.userdata"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(userData)).To(ContainSubstring("echo bootstrap"))

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, keyOf(claim), &infrav1.MachineClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim still there: %v", err)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	var left []string
	for _, v := range sim.VMs() {
		if !v.Template {
			left = append(left, v.Name)
		}
	}
	g.Expect(left).To(ConsistOf("DC0_C0_RP0_VM1"), "only the VM that is not HyperFleet's is left")

	calls := sim.Calls()
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("vSphere SOAP calls of one VM's life: %d %v", total, calls)
	g.Expect(total).To(BeNumerically("<=", maxVSphereCallsPerVM), "calls by method: %v", calls)
}

// TestVSphereSnapshotRestoreDelete: a MachineSnapshot with memory of a running persistent claim on
// vSphere is a vCenter snapshot with memory; a MachineSnapshotRestore reverts to it and the VM
// runs again; deleting the MachineSnapshot removes the snapshot.
func TestVSphereSnapshotRestoreDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVSphereVM(t)
	ns := claim.Namespace

	snap := builder.NewMachineSnapshot("before-upgrade", ns, claim.Name)
	snap.Spec.WithMemory = true
	g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, snap)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseSucceeded), "conditions: %+v", got.Status.Conditions)
		g.Expect(got.Status.ReadyToUse).To(BeTrue())
		g.Expect(got.Status.WithMemory).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	snapshotsOf := func() []string {
		for _, v := range sim.VMs() {
			if v.InstanceUUID == get(g, claim).Status.VMID {
				return v.Snapshots
			}
		}
		return nil
	}
	g.Expect(snapshotsOf()).To(ConsistOf(get(g, snap).Status.SnapshotName))

	restore := builder.NewMachineSnapshotRestore("back", ns, claim.Name, snap.Name)
	g.Expect(env.Client.Create(ctx, restore)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, restore)
		g.Expect(got.Status.Complete).To(BeTrue(), "%v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, snap)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(snap), &fleetv1.MachineSnapshot{})) },
		30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(snapshotsOf()).To(BeEmpty())
}

// persistentVSphereVM is a running persistent claim (run strategy Always) on the vSphere
// simulator, through the real manager.
func persistentVSphereVM(t *testing.T) (*infrav1.MachineClaim, *vspheresim.Simulator) {
	t.Helper()
	g := NewWithT(t)
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	startManager(t)
	ns := newNamespace(t)
	controllertest.VSphereCluster(t, ns, "vc", sim)
	claim := builder.NewMachineClaim("db-0", ns).WithHypervisorCluster("vc").WithTemplateName("ubuntu-2404-runner").
		WithResources(2, 2048).WithPersistent(infrav1.RunStrategyAlways).Build()
	g.Expect(env.Client.Create(context.Background(), claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "conditions: %+v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return get(g, claim), sim
}

// TestVSphereMigration: a MachineMigration to any host moves the running VM live with vMotion;
// the claim's status.node is the new host, where the simulator holds the same VM, running.
func TestVSphereMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVSphereVM(t)
	source := claim.Status.Node
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(get(g, claim), infrav1.MachineClaimLiveMigratableCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	moved := builder.NewMachineMigration("moved", claim.Namespace, claim.Name, fleetv1.MigrationTargetAny)
	g.Expect(env.Client.Create(ctx, moved)).To(Succeed())
	got := migrationDone(g, moved)
	g.Expect(got.Status.Phase).To(Equal(fleetv1.MachineMigrationPhaseSucceeded), "%+v", got.Status)
	g.Expect(got.Status.SourceHost).To(Equal(source))
	g.Expect(got.Status.TargetHost).NotTo(Equal(source))
	g.Expect(got.Status.Online).To(BeTrue())
	g.Eventually(func(g Gomega) {
		c := get(g, claim)
		g.Expect(c.Status.Node).To(Equal(got.Status.TargetHost))
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	for _, v := range sim.VMs() {
		if v.InstanceUUID == claim.Status.VMID {
			g.Expect(v.Host).To(Equal(got.Status.TargetHost))
			g.Expect(v.PowerState).To(BeEquivalentTo("poweredOn"))
		}
	}
}

// TestVSphereFaultsEventuallySucceed: a burst of claims on vSphere while vCenter refuses clones
// as busy, a power-on for a privilege and a reconfiguration as busy, and ends a session: every
// claim ends with exactly one running VM, and no VM is left over.
func TestVSphereFaultsEventuallySucceed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	sim.Fail("CloneVM_Task", &types.TaskInProgress{}, 2)
	sim.Fail("PowerOnVM_Task", &types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOn"}, 1)
	sim.Fail("ReconfigVM_Task", &types.TaskInProgress{}, 1)
	startManager(t)
	ns := newNamespace(t)
	hc := controllertest.VSphereCluster(t, ns, "vc", sim)
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(get(g, hc), infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(sim.EndSessions()).To(Succeed())
	var claims []*infrav1.MachineClaim
	for i := range 5 {
		c := builder.NewMachineClaim(fmt.Sprintf("burst-%d", i), ns).WithHypervisorCluster("vc").
			WithTemplateName("ubuntu-2404-runner", "runner").WithResources(1, 1024).Build()
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		claims = append(claims, c)
	}
	// A failure backs off from 5 s: a few rounds of it.
	ids := map[string]bool{}
	g.Eventually(func(g Gomega) {
		ids = map[string]bool{}
		for _, c := range claims {
			got := get(g, c)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%s: %+v", c.Name, got.Status.Conditions)
			ids[got.Status.VMID] = true
		}
	}, 90*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(ids).To(HaveLen(len(claims)), "one VM per claim")
	owned := map[string]bool{}
	for _, v := range sim.VMs() {
		if v.ExtraConfig["hyperfleet.installation"] != "" {
			owned[v.InstanceUUID] = true
			g.Expect(v.PowerState).To(BeEquivalentTo("poweredOn"))
		}
	}
	g.Expect(owned).To(Equal(ids), "the simulator holds exactly the claims' VMs")
}
