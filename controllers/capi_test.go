package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// capiMachine creates a Machine with a MachineClaim as its infrastructure and a plain bootstrap data Secret.
func capiMachine(t *testing.T, ns, name string) (*clusterv1.Machine, *infrav1.MachineClaim) {
	t.Helper()
	g := NewWithT(t)
	bootstrapSecret(t, ns, name+"-bootstrap", controllertest.UserData)
	labels := map[string]string{clusterv1.ClusterNameLabel: "fleet"}
	claim := builder.NewMachineClaim(name, ns).WithLabels(labels).Build()
	g.Expect(env.Client.Create(context.Background(), claim)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: "fleet",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name},
		},
	}
	g.Expect(env.Client.Create(context.Background(), machine)).To(Succeed())
	return machine, claim
}

// TestClusterAPIMachineLifecycle runs the real Cluster API controllers with HyperFleet's: a Machine
// with a MachineClaim becomes a tagged VM, reaches Provisioned with providerID and addresses, and
// its VM powering itself off removes VM and Machine within one sweep.
func TestClusterAPIMachineLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, cluster := startFleet(t)

	g.Eventually(func(g Gomega) {
		got := get(g, cluster)
		g.Expect(ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "Cluster API sees the HypervisorCluster provisioned")

	machine, claim := capiMachine(t, ns, "runner-0")
	g.Eventually(func(g Gomega) {
		got := get(g, machine)
		g.Expect(got.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
		g.Expect(got.Status.Addresses).NotTo(BeEmpty())
		g.Expect(got.Status.Phase).To(Equal(string(clusterv1.MachinePhaseProvisioned)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	gotClaim := get(g, claim)
	g.Expect(gotClaim.OwnerReferences).To(ContainElement(HaveField("Kind", "Machine")))
	vm, ok := sim.VM(vmidOf(gotClaim.Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Tags).To(ContainElement("hyperfleet"))
	g.Expect(vm.Status).To(Equal("running"))

	// The in-VM agent powers the VM off after its job: VM and Machine go.
	g.Expect(sim.PowerOff(vm.VMID)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(machine), machine))
	}, 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	_, exists := sim.VM(vm.VMID)
	g.Expect(exists).To(BeFalse())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))).To(BeTrue())

	// Deleting a Machine removes its VM too.
	machine2, claim2 := capiMachine(t, ns, "runner-1")
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim2).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	vmid := vmidOf(get(g, claim2).Status.VMID)
	g.Expect(env.Client.Delete(ctx, machine2)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(machine2), machine2))
	}, 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	_, exists = sim.VM(vmid)
	g.Expect(exists).To(BeFalse())
	g.Expect(ownedVMs(sim)).To(BeEmpty())
}

// TestClaimReadyOnlyAfterAttestation gives a Machine HyperFleet's BootstrapConfig: its claim stays
// short of Ready while the VM merely runs, and turns Ready when the bootstrap records attestation.
func TestClaimReadyOnlyAfterAttestation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, _ := startFleet(t)
	config := builder.NewBootstrapConfig("runner-a", ns).Build()
	claim := capiMachineWithConfig(t, ns, config)

	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.IsTrue(got, infrav1.MachineClaimVMProvisionedCondition)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.WaitingForBootstrapReason))
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseProvisioning))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	vm, ok := sim.VM(vmidOf(get(g, claim).Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal("running"))

	// The bootstrap service records attestation on the BootstrapConfig.
	got := get(g, config)
	got.Status.AttestedTime = &metav1.Time{Time: time.Now()}
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue())
		g.Expect(got.Status.BootstrappedTime).NotTo(BeNil())
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestClaimWaitsForBootstrapData gives a Machine a bootstrap config that never produces data: its
// claim must not clone, let alone start, a VM without bootstrap data (the VM would boot without
// its agent and idle until removed).
func TestClaimWaitsForBootstrapData(t *testing.T) {
	g := NewWithT(t)
	sim, ns, _ := startFleet(t)
	// No SPIRE server answers here: the BootstrapConfig never gets a data Secret.
	config := builder.NewBootstrapConfig("runner-b", ns).WithAttestation(bootstrapv1.AttestationSpec{
		Provider: bootstrapv1.IdentitySPIRE, SPIREServerAddress: "spire.example:8081"}).Build()
	claim := capiMachineWithConfig(t, ns, config)

	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.OwnerReferences).To(ContainElement(HaveField("Kind", "Machine")))
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.WaitingForBootstrapDataReason))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, claim).Status.VMID).To(BeZero())
		g.Expect(ownedVMs(sim)).To(BeEmpty())
	}, 5*time.Second, 200*time.Millisecond).Should(Succeed(), "no VM without bootstrap data")
}
