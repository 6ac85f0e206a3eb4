package bootstrapconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestJoinTokenOfAQueuedRunnerIsReplaced: a runner queued behind a burst longer than its join
// token's lifetime used to get a VM whose token had expired (a 1,000-job burst lost 11 runners
// that way). While no VM was configured with the bootstrap data, the token is replaced shortly
// before it expires; once a VM holds it, it is left to expire.
func TestJoinTokenOfAQueuedRunnerIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startBootstrapController(t, newCANamespace(t))
	ns := controllertest.NewNamespace(t)
	short := func(bc *bootstrapv1.BootstrapConfig) {
		bc.Spec.Attestation.JoinTokenTTL = &metav1.Duration{Duration: 9 * time.Second} // replaced 3 s before expiry
	}
	_, _, queued := runnerMachine(t, ns, "queued", "pool", true, short)
	_, configured := runnerMachineInCluster(t, ns, "configured", "pool", short)
	// The second runner's claim has configured its VM with the first token.
	claim := builder.NewMachineClaim("configured", ns).WithHypervisorCluster("pve").Build()
	g.Expect(controllertest.Env.Client.Create(ctx, claim)).To(Succeed())
	claim.Status.CompletedStep = infrav1.StepConfigured
	g.Expect(controllertest.Env.Client.Status().Update(ctx, claim)).To(Succeed())

	first := map[string]string{}
	for _, bc := range []*bootstrapv1.BootstrapConfig{queued, configured} {
		g.Eventually(func(g Gomega) {
			controllertest.Get(g, bc)
			g.Expect(bc.Status.JoinToken).NotTo(BeNil())
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		first[bc.Name] = bc.Status.JoinToken.SHA256
	}
	// The queued runner's first token, as whoever read its Secret before the refresh holds it.
	// The token's hash is recorded before the Secret carrying it is written: wait for the Secret.
	var oldCfg *agent.Config
	g.Eventually(func(g Gomega) {
		oldSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns}}
		controllertest.Get(g, oldSecret)
		cfg, err := agent.ConfigFromUserData(oldSecret.Data["value"], agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(identity.JoinTokenMatches(cfg.JoinToken, first["queued"])).To(BeTrue())
		oldCfg = cfg
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// The queued runner (its claim does not exist yet, so no VM) gets a new token before the old one expires.
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, queued)
		g.Expect(queued.Status.JoinToken).NotTo(BeNil())
		g.Expect(queued.Status.JoinToken.SHA256).NotTo(Equal(first["queued"]))
		g.Expect(conditions.GetReason(queued, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.WaitingForAttestationReason))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns}}
		controllertest.Get(g, secret)
		cfg, err := agent.ConfigFromUserData(secret.Data["value"], agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(identity.JoinTokenMatches(cfg.JoinToken, queued.Status.JoinToken.SHA256)).To(BeTrue(), "the Secret carries the new token")
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	// The bootstrap service redeems a token only against the recorded hash: the old one is dead.
	g.Expect(identity.JoinTokenMatches(oldCfg.JoinToken, queued.Status.JoinToken.SHA256)).To(BeFalse(), "the replaced token no longer redeems")

	// The configured runner's token is never replaced: it expires.
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, configured)
		g.Expect(conditions.GetReason(configured, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.TokenExpiredReason))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(configured.Status.JoinToken.SHA256).To(Equal(first["configured"]))
}

// TestClaimNeverDeliversAReplacedToken plays the race between a claim configuring its VM and its
// runner's join token being replaced (nine runners of a 1,000-job burst got a dead token that
// way): the config records a new token's hash while its Secret still holds the old token (a
// replacement between its two writes, or one whose Secret write failed), and the claim, held until
// then, is let go at that moment. The VM must get a token the bootstrap service redeems (its hash
// is the one recorded), the config is marked delivered, and the token is not replaced afterwards.
func TestClaimNeverDeliversAReplacedToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, _ := controllertest.StartFleet(t)
	config := builder.NewBootstrapConfig("race", ns).Build()
	claim := controllertest.CAPIMachineWithConfig(t, ns, config, func(c *infrav1.MachineClaim) {
		c.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"} // held until the race is set
	})

	var first string
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, config)
		g.Expect(config.Status.JoinToken).NotTo(BeNil())
		first = config.Status.JoinToken.SHA256
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "race", Namespace: ns}}
		controllertest.Get(g, secret)
		g.Expect(secret.Annotations).To(HaveKeyWithValue(bootstrapv1.JoinTokenHashAnnotation, first))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// A replacement records its token's hash; the Secret still carries the first token, and stays
	// so while the config is paused (as if its controller were slow to write it).
	before := config.DeepCopy()
	config.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"}
	g.Expect(controllertest.Env.Client.Patch(ctx, config, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(controllertest.Get(g, config), clusterv1.PausedCondition)).To(BeTrue())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	recorded := identity.HashJoinToken("hfjt_" + ns + "_race_" + strings.Repeat("ab", 32))
	before = config.DeepCopy()
	config.Status.JoinToken.SHA256 = recorded
	g.Expect(controllertest.Env.Client.Status().Patch(ctx, config, client.MergeFrom(before))).To(Succeed())
	claimBefore := controllertest.Get(g, claim).DeepCopy()
	delete(claim.Annotations, clusterv1.PausedAnnotation)
	g.Expect(controllertest.Env.Client.Patch(ctx, claim, client.MergeFrom(claimBefore))).To(Succeed())

	// The claim clones, marks the config and waits: the Secret's token is not the recorded one.
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, claim)
		g.Expect(conditions.GetMessage(got, infrav1.MachineClaimVMProvisionedCondition)).To(ContainSubstring("is being replaced"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, claim).Status.CompletedStep).NotTo(BeElementOf(infrav1.StepConfigured, infrav1.StepStarted))
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed(), "no VM configured with a token that does not redeem")

	// The config's controller resumes: the Secret lags the recorded hash, so it mints again.
	before = controllertest.Get(g, config).DeepCopy()
	delete(config.Annotations, clusterv1.PausedAnnotation)
	g.Expect(controllertest.Env.Client.Patch(ctx, config, client.MergeFrom(before))).To(Succeed())
	var token string
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, claim)
		g.Expect(got.Status.CompletedStep).To(BeElementOf(infrav1.StepConfigured, infrav1.StepStarted))
		vm, ok := sim.VM(controllertest.VMIDOf(got.Status.VMID))
		g.Expect(ok).To(BeTrue())
		seed, ok := sim.StorageFile(vm.Node, strings.TrimSuffix(vm.Disks[proxmox.DefaultCloudInitDevice], ",media=cdrom"))
		g.Expect(ok).To(BeTrue())
		files, err := pvesim.ReadNoCloudSeed(seed)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := agent.ConfigFromUserData(files["user-data"], agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		token = cfg.JoinToken
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	controllertest.Get(g, config)
	g.Expect(config.Annotations).To(HaveKeyWithValue(bootstrapv1.BootstrapDataDeliveredAnnotation, "race"))
	g.Expect(identity.JoinTokenMatches(token, config.Status.JoinToken.SHA256)).To(BeTrue(),
		"the VM's token is the one the bootstrap service redeems")
	g.Expect(config.Status.JoinToken.SHA256).NotTo(BeElementOf(first, recorded), "minted again once the Secret lagged")
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, config).Status.JoinToken.SHA256).To(Equal(identity.HashJoinToken(token)), "delivered: never replaced")
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
}
