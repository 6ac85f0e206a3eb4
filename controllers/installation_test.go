package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// installation is one HyperFleet installation: a management cluster (API server) with its manager.
type installation struct {
	name string
	env  *testenv.Env
}

func (i installation) client() client.Client { return i.env.Client }

// TestTwoInstallationsShareOneProxmox plays a second installation (staging next to prod) on the
// same Proxmox VE cluster, with objects named exactly like the first one's: same namespace, same
// HypervisorCluster, same claim names. Each installation must sweep only its own VMs: no VM of
// the other is stopped, destroyed or counted, and deleting a claim in one removes only its VM.
func TestTwoInstallationsShareOneProxmox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	second, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = second.Stop() })

	const ns, hcName = "runners", "pve"
	prod, staging := installation{"prod", env}, installation{"staging", second}
	claims := map[string]*infrav1.MachineClaim{}
	for _, inst := range []installation{prod, staging} {
		startManagerOn(t, inst.env, nil, testTiming{Sweep: 500 * time.Millisecond, OrphanGrace: time.Second})
		c := inst.client()
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: hcName + "-credentials", Namespace: ns},
			StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret},
		})).To(Succeed())
		g.Expect(c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: hcName + "-ca", Namespace: ns},
			Data:       map[string][]byte{"ca.crt": sim.CACertPEM()},
		})).To(Succeed())
		g.Expect(c.Create(ctx, builder.NewHypervisorCluster(hcName, ns).
			WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).WithCABundle(hcName+"-ca", "").
			WithProxmox(infrav1.ProxmoxClusterParameters{VMIDRange: &infrav1.VMIDRange{Start: 1000, End: 1999}}).
			Build())).To(Succeed())
		claim := builder.NewMachineClaim("runner-0", ns).WithHypervisorCluster(hcName).Build()
		g.Expect(c.Create(ctx, claim)).To(Succeed())
		claims[inst.name] = claim
	}

	vmids := map[string]int{}
	for _, inst := range []installation{prod, staging} {
		claim := claims[inst.name]
		g.Eventually(func(g Gomega) {
			g.Expect(inst.client().Get(ctx, keyOf(claim), claim)).To(Succeed())
			g.Expect(claim.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "%s: %+v", inst.name, claim.Status.Conditions)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		vmids[inst.name] = vmidOf(claim.Status.VMID)
	}
	g.Expect(vmids["prod"]).NotTo(Equal(vmids["staging"]))

	// The installations have different identities, shown by kubectl and in each VM's description.
	ids := map[string]string{}
	for _, inst := range []installation{prod, staging} {
		hc := &infrav1.HypervisorCluster{}
		g.Expect(inst.client().Get(ctx, client.ObjectKey{Namespace: ns, Name: hcName}, hc)).To(Succeed())
		g.Expect(hc.Spec.InstallationID).NotTo(BeEmpty())
		ids[inst.name] = hc.Spec.InstallationID
		vm, ok := sim.VM(vmids[inst.name])
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Description).To(ContainSubstring("installation: " + hc.Spec.InstallationID))
	}
	g.Expect(ids["prod"]).NotTo(Equal(ids["staging"]))

	// Many sweeps later (every 500ms, orphans kept 1s) both VMs still run and each installation
	// counts only its own.
	g.Consistently(func(g Gomega) {
		for _, inst := range []installation{prod, staging} {
			vm, ok := sim.VM(vmids[inst.name])
			g.Expect(ok).To(BeTrue(), "%s's VM %d was destroyed by the other installation", inst.name, vmids[inst.name])
			g.Expect(vm.Status).To(Equal("running"), "%s's VM %d", inst.name, vmids[inst.name])
		}
	}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, inst := range []installation{prod, staging} {
		hc := &infrav1.HypervisorCluster{}
		g.Expect(inst.client().Get(ctx, client.ObjectKey{Namespace: ns, Name: hcName}, hc)).To(Succeed())
		g.Expect(hc.Status.OwnedVMs).To(Equal(int32(1)), inst.name)
	}

	// Deleting staging's claim destroys staging's VM and nothing else.
	g.Expect(staging.client().Delete(ctx, claims["staging"])).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(staging.client().Get(ctx, keyOf(claims["staging"]), &infrav1.MachineClaim{}))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	_, exists := sim.VM(vmids["staging"])
	g.Expect(exists).To(BeFalse())
	g.Consistently(func(g Gomega) {
		vm, ok := sim.VM(vmids["prod"])
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// legacyMarks writes on a VM the marks a release before installation identities wrote for the
// claim ns/name with metadata.uid uid of HypervisorCluster ns/hc.
func legacyMarks(t *testing.T, sim *pvesim.Simulator, vmid int, ns, hc, name, uid string) {
	t.Helper()
	g := NewWithT(t)
	tag := proxmox.ClusterTag(ns + "/" + hc)
	g.Expect(sim.SetVMConfig(vmid, "tags", strings.Join([]string{"ci", "hf-claim-" + ns + "." + name, tag, "hf-uid-" + uid, "hyperfleet"}, ";"))).To(Succeed())
	g.Expect(sim.SetVMConfig(vmid, "description", "HyperFleet MachineClaim\n\n```hyperfleet\nmanaged-by: hyperfleet\ncluster: "+ns+"/"+hc+
		"\ncluster-tag: "+tag+"\nclaim: "+ns+"/"+name+"\nclaim-uid: "+uid+"\n```")).To(Succeed())
}

// TestUpgradeAdoptsLegacyVMs upgrades an installation whose VMs carry the marks of a release
// before installation identities, on a Proxmox shared with another installation whose objects
// have the same names (so the same legacy marks). The claim that tracks a legacy VM adopts it and
// it keeps working (swept when it powers off); the other installation's legacy VM is never
// touched.
func TestUpgradeAdoptsLegacyVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	ns := newNamespace(t)

	// What the old release left: a running VM per claim, marked the old way, and claims whose
	// status tracks them. The twin VM belongs to the other installation's "runner-1".
	owner := proxmox.Config{Endpoint: sim.URL(), TokenID: pvesim.TestTokenID, TokenSecret: pvesim.TestTokenSecret,
		CABundle: sim.CACertPEM(), Cluster: ns + "/pve", InstallationID: "00000000old00000", Timeout: 5 * time.Second}
	maker, err := proxmox.New(owner)
	g.Expect(err).NotTo(HaveOccurred())
	makeVM := func(vmid int, name string) {
		ref := hypervisor.VMRef{Node: "pve1", ID: idOf(vmid)}
		_, task, err := maker.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: "9000"}, Target: ref, Name: name,
			Owner: hypervisor.Ownership{ClaimNamespace: ns, ClaimName: name, ClaimID: "x"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() bool { s, _ := maker.TaskStatus(ctx, "", task); return s.Done }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
		_, err = maker.Configure(ctx, ref, hypervisor.ConfigSpec{Tags: []string{"ci"}})
		g.Expect(err).NotTo(HaveOccurred())
		task, err = maker.Start(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() bool { s, _ := maker.TaskStatus(ctx, "", task); return s.Done }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
	}
	proxmoxCluster(t, ns, "pve", sim)
	claim := builder.NewMachineClaim("runner-0", ns).WithHypervisorCluster("pve").
		WithLabels(map[string]string{infrav1.HypervisorClusterNameLabel: "pve"}).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	makeVM(1500, "runner-0")
	legacyMarks(t, sim, 1500, ns, "pve", "runner-0", string(claim.UID))
	claim.Spec.ProviderID = fmt.Sprintf("%sold-hc-uid/1500", infrav1.ProviderIDPrefix)
	g.Expect(env.Client.Update(ctx, claim)).To(Succeed())
	claim.Status = infrav1.MachineClaimStatus{VMID: "1500", Node: "pve1", CompletedStep: infrav1.StepStarted,
		PowerState: "Running", Phase: infrav1.MachineClaimPhaseReady,
		Initialization: &infrav1.MachineClaimInitializationStatus{Provisioned: ptr.To(true)}}
	g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
	makeVM(1501, "runner-1")
	legacyMarks(t, sim, 1501, ns, "pve", "runner-1", "9c4a1f0e-0000-4000-8000-other0install")
	twinBefore, _ := sim.VM(1501)

	startManager(t, testTiming{Sweep: 500 * time.Millisecond, OrphanGrace: time.Second})

	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Spec.ClaimID).NotTo(BeEmpty())
		vm, ok := sim.VM(1500)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Tags).To(ContainElements("hyperfleet", "ci", "hf-id-"+got.Spec.ClaimID))
		g.Expect(vm.Tags).NotTo(ContainElement(HavePrefix("hf-uid-")))
		g.Expect(vm.Status).To(Equal("running"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	hc := get(g, &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pve"}})
	vm, _ := sim.VM(1500)
	g.Expect(vm.Description).To(ContainSubstring("installation: " + hc.Spec.InstallationID))

	// The other installation's legacy VM is never swept, stopped or re-marked.
	g.Consistently(func(g Gomega) {
		twin, ok := sim.VM(1501)
		g.Expect(ok).To(BeTrue())
		g.Expect(twin.Status).To(Equal("running"))
		g.Expect(twin.Tags).To(Equal(twinBefore.Tags))
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	// The adopted VM keeps working: powered off by its agent, it is swept with its claim.
	g.Expect(sim.PowerOff(1500)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), &infrav1.MachineClaim{}))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	_, exists := sim.VM(1500)
	g.Expect(exists).To(BeFalse())
	_, exists = sim.VM(1501)
	g.Expect(exists).To(BeTrue())
}

// TestPlainHTTPIsReportedOnEveryConnect: a HypervisorCluster whose owner allowed an http://
// endpoint works, but says so where people look: the InsecureTransport condition, the Ready
// reason, and a Warning Event on every connection, not just the first.
func TestPlainHTTPIsReportedOnEveryConnect(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{PlainHTTP: true})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Minute})
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pve-credentials", Namespace: ns},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret},
	})).To(Succeed())
	hc := builder.NewHypervisorCluster("pve", ns).WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).Build()
	g.Expect(hc.Spec.Endpoint).To(HavePrefix("http://"))
	hc.Spec.AllowInsecureHTTP = true
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := get(g, hc)
		c := conditions.Get(got, infrav1.HypervisorClusterInsecureTransportCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(infrav1.HypervisorClusterPlainHTTPReason))
		g.Expect(c.Message).To(ContainSubstring("clear text"))
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.HypervisorClusterInsecureReason))
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue(), "it works, loudly")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		var count int32
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "pve" && e.Type == corev1.EventTypeWarning && e.Reason == infrav1.HypervisorClusterInsecureTransportCondition {
				count += max(e.Count, 1)
			}
		}
		g.Expect(count).To(BeNumerically(">=", 3), "a Warning Event on every connection")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}
