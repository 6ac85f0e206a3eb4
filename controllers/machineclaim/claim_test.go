package machineclaim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestStandaloneClaimLifecycle applies a single MachineClaim, as `kubectl apply` of one VM would, and
// follows it from clone to a running, tagged VM and back to nothing.
func TestStandaloneClaimLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	foreignBefore := foreignVMs(sim)
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	bootstrapSecret(t, ns, "vm-a-userdata", controllertest.UserData)
	claim := builder.NewMachineClaim("vm-a", ns).WithHypervisorCluster("pve").WithBootstrapSecret("vm-a-userdata").
		WithResources(2, 2048).WithDiskGiB(40).WithNetwork("vmbr0", 42).WithTags("ci").
		WithUserData("#cloud-config\npackages: [git]\n").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "conditions: %+v", got.Status.Conditions)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	got := get(g, claim)
	g.Expect(got.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
	g.Expect(got.Status.Addresses).NotTo(BeEmpty())
	g.Expect(*got.Status.Initialization.Provisioned).To(BeTrue())
	g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(got.Labels).To(HaveKeyWithValue(infrav1.HypervisorClusterNameLabel, "pve"))

	vm, ok := sim.VM(vmidOf(got.Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal("running"))
	g.Expect(vm.Node).To(Equal(got.Status.Node))
	g.Expect(vm.Tags).To(ContainElements("hyperfleet", "ci"))
	g.Expect(vm.Cores).To(Equal(2))
	g.Expect(vm.MemoryMiB).To(Equal(2048))
	g.Expect(vm.Net["net0"]).To(And(ContainSubstring("bridge=vmbr0"), ContainSubstring("tag=42")))
	g.Expect(vm.Disks["scsi0"]).To(ContainSubstring("size=40G"))
	g.Expect(vm.Disks["ide3"]).To(HaveSuffix(",media=cdrom"), "the cloud-init ISO is attached")
	g.Expect(sim.Requests()["PUT /nodes/{node}/qemu/{vmid}/config"]).To(Equal(1), "hardware and cloud-init in one config write")
	g.Expect(vmidOf(got.Status.VMID)).To(BeNumerically(">=", 1000))
	g.Expect(vmidOf(got.Status.VMID)).To(BeNumerically("<=", 1999))
	g.Expect(ownedVMs(sim)).To(HaveLen(1))

	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	_, exists := sim.VM(vmidOf(got.Status.VMID))
	g.Expect(exists).To(BeFalse(), "the VM is destroyed before the claim is released")
	g.Expect(ownedVMs(sim)).To(BeEmpty())
	g.Expect(foreignVMs(sim)).To(Equal(foreignBefore), "foreign VMs are never touched")
}

// TestPoweredOffVMIsSwept powers a runner's VM off from inside (as the agent does after its job) and
// expects the sweep to delete the claim and the VM.
func TestPoweredOffVMIsSwept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claim := builder.NewMachineClaim("vm-b", ns).WithHypervisorCluster("pve").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	vmid := vmidOf(get(g, claim).Status.VMID)

	poweredOff := time.Now()
	g.Expect(sim.PowerOff(vmid)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), claim))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	t.Logf("stopped VM and its claim removed %s after power-off (sweep interval 1s)", time.Since(poweredOff).Round(10*time.Millisecond))
	_, exists := sim.VM(vmid)
	g.Expect(exists).To(BeFalse())
}

// TestClaimsWaitForUnavailableCluster proves nothing is provisioned on a HypervisorCluster that cannot
// be reached or authorised, that conditions say why, and that rotating the Secret recovers.
func TestClaimsWaitForUnavailableCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	hc := proxmoxCluster(t, ns, "pve", sim)
	creds := credentialsSecret(g, hc)
	creds.Data["token_secret"] = []byte("wrong")
	g.Expect(env.Client.Update(ctx, creds)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		c := conditions.Get(got, infrav1.HypervisorClusterAvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.HypervisorClusterUnauthorizedReason), "message: %s", c.Message)
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	claim := builder.NewMachineClaim("vm-c", ns).WithHypervisorCluster("pve").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.HypervisorClusterUnavailableReason))
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhasePending))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func() int { return len(ownedVMs(sim)) }, 2*time.Second, 200*time.Millisecond).Should(BeZero())

	// Rotate the Secret back to the right token: no restart needed.
	creds = credentialsSecret(g, hc)
	creds.Data["token_secret"] = []byte(pvesim.TestTokenSecret)
	g.Expect(env.Client.Update(ctx, creds)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(ownedVMs(sim)).To(HaveLen(1))
}

// TestHypervisorClusterReasons checks each connection failure is named precisely.
func TestHypervisorClusterReasons(t *testing.T) {
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	ns := newNamespace(t)
	cases := []struct {
		name   string
		mutate func(*infrav1.HypervisorCluster)
		reason string
		msg    string
	}{
		{"missing credentials", func(hc *infrav1.HypervisorCluster) { hc.Spec.CredentialsRef.Name = "nope" },
			infrav1.HypervisorClusterCredentialsNotFoundReason, "credentials Secret"},
		{"missing CA bundle", func(hc *infrav1.HypervisorCluster) { hc.Spec.CABundleRef.Name = "nope" },
			infrav1.HypervisorClusterCABundleNotFoundReason, "CA bundle Secret"},
		{"untrusted certificate", func(hc *infrav1.HypervisorCluster) { hc.Spec.CABundleRef = nil },
			infrav1.HypervisorClusterTLSErrorReason, "certificate"},
		{"nothing listening", func(hc *infrav1.HypervisorCluster) { hc.Spec.Endpoint = "https://127.0.0.1:1" },
			infrav1.HypervisorClusterUnreachableReason, "127.0.0.1:1"},
		{"insecure is visible", func(hc *infrav1.HypervisorCluster) { hc.Spec.CABundleRef = nil; hc.Spec.InsecureSkipTLSVerify = true },
			infrav1.HypervisorClusterInsecureReason, "TLS verification is disabled"},
		{"allowed nodes all unknown", func(hc *infrav1.HypervisorCluster) { hc.Spec.AllowedNodes = []string{"elsewhere"} },
			infrav1.HypervisorClusterNoNodesReason, "elsewhere"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hc := proxmoxCluster(t, ns, fmt.Sprintf("hc-%d", i), sim, tc.mutate)
			g.Eventually(func(g Gomega) {
				got := get(g, hc)
				c := conditions.Get(got, infrav1.ReadyCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(tc.reason), "message: %s", c.Message)
				g.Expect(strings.ToLower(c.Message)).To(ContainSubstring(strings.ToLower(tc.msg)))
			}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}
