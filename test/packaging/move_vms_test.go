package packaging

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// TestClusterctlMoveKeepsVMs moves a HypervisorCluster and a standalone MachineClaim with a running
// VM between two management clusters with the real clusterctl, while HyperFleet's controllers run
// on both sides against one Proxmox simulator. Move gives every object a new UID and drops status;
// the VM must survive it: not destroyed by the source's deletion of its copy, not swept as an
// orphan by the target, not duplicated by a claim that forgot it had one.
func TestClusterctlMoveKeepsVMs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two API servers")
	}
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	from, to := startAPIServer(t), startAPIServer(t)
	const ns = "moved"
	for _, e := range []*testenv.Env{from, to} {
		installProviders(t, e)
		createNamespace(t, e, ns)
		startHyperFleet(t, e)
	}

	// A Cluster whose infrastructure is the HypervisorCluster, as Cluster API core would mark it.
	c := from.Client
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "demo"}},
	}
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	moveLabel := map[string]string{clusterctlv1.ClusterctlMoveLabel: ""}
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-credentials", Namespace: ns, Labels: moveLabel},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret},
	})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-ca", Namespace: ns, Labels: moveLabel},
		Data:       map[string][]byte{"ca.crt": sim.CACertPEM()},
	})).To(Succeed())
	hc := builder.NewHypervisorCluster("demo", ns).
		WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).WithCredentials("demo-credentials").WithCABundle("demo-ca", "").
		WithProxmox(infrav1.ProxmoxClusterParameters{VMIDRange: &infrav1.VMIDRange{Start: 1000, End: 1999}}).Build()
	hc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "demo", UID: cluster.UID}}
	g.Expect(c.Create(ctx, hc)).To(Succeed())
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(c.Status().Update(ctx, cluster)).To(Succeed())
	markControlPlaneInitialized(t, from, ns, "demo")

	claim := builder.NewMachineClaim("vm-standalone", ns).WithHypervisorCluster("demo").WithLabels(moveLabel).Build()
	g.Expect(c.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%+v", claim.Status.Conditions)
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	vmid := vmidOf(claim.Status.VMID)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
	installationID := hc.Spec.InstallationID
	g.Expect(installationID).NotTo(BeEmpty())

	out, err := tryMove(from, to, ns)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	// The target's claim finds its VM again, same identity, same VMID.
	moved := &infrav1.MachineClaim{}
	g.Eventually(func(g Gomega) {
		g.Expect(to.Client.Get(ctx, client.ObjectKeyFromObject(claim), moved)).To(Succeed())
		g.Expect(moved.UID).NotTo(Equal(claim.UID))
		g.Expect(moved.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%+v", moved.Status.Conditions)
		g.Expect(moved.Status.VMID).To(Equal(strconv.Itoa(vmid)))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(moved.Spec.ClaimID).To(Equal(claim.Spec.ClaimID))
	movedHC := &infrav1.HypervisorCluster{}
	g.Expect(to.Client.Get(ctx, client.ObjectKeyFromObject(hc), movedHC)).To(Succeed())
	g.Expect(movedHC.Spec.InstallationID).To(Equal(installationID))

	// Sweeps on the target (every 500ms, orphans kept 1s) keep the VM; nothing else appears.
	g.Eventually(func(g Gomega) {
		g.Expect(to.Client.Get(ctx, client.ObjectKeyFromObject(hc), movedHC)).To(Succeed())
		g.Expect(movedHC.Status.LastSweepTime).NotTo(BeNil())
		g.Expect(movedHC.Status.OwnedVMs).To(Equal(int32(1)))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		vm, ok := sim.VM(vmid)
		g.Expect(ok).To(BeTrue(), "VM %d was destroyed", vmid)
		g.Expect(vm.Status).To(Equal("running"))
		g.Expect(managedVMs(sim)).To(ConsistOf(vmid), "no VM leaked or duplicated")
	}, 4*time.Second, 200*time.Millisecond).Should(Succeed())
}

// startHyperFleet runs HyperFleet's manager against e until the test ends.
func startHyperFleet(t *testing.T, e *testenv.Env) {
	t.Helper()
	cfg := &config.Manager{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", Concurrency: 4,
		SyncPeriod: time.Minute, SweepInterval: 500 * time.Millisecond, OrphanGracePeriod: time.Second,
		ProviderTimeout: 5 * time.Second, LeaderElectionID: "hyperfleet-move-test",
		BootstrapCASecret: "default/hyperfleet-bootstrap-ca", TrustDomain: "hyperfleet.local",
		BootstrapServiceURL: "https://127.0.0.1:8443", RepairInterval: time.Hour,
		WorkloadReaderServiceAccount: "default/hyperfleet-workload-reader",
		WebhookBindAddress:           "0",
	}
	mgr, err := manager.New(context.Background(), e.Config, cfg, func(o *controllers.Options) {
		o.Pace.TaskPollInterval = 100 * time.Millisecond
		o.Testing.SkipNameValidation = true
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	testenv.RunManager(t, mgr)
}

// managedVMs are the VMIDs of the simulator's VMs that HyperFleet marked.
func managedVMs(sim *pvesim.Simulator) []int {
	var ids []int
	for _, vm := range sim.VMs() {
		if strings.Contains(vm.Description, "managed-by: hyperfleet") {
			ids = append(ids, vm.VMID)
		}
	}
	return ids
}
