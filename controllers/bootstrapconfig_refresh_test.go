package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestJoinTokenOfAQueuedRunnerIsReplaced: a runner queued behind a burst longer than its join
// token's lifetime used to get a VM whose token had expired (a 1,000-job burst lost 11 runners
// that way). While no VM was configured with the bootstrap data, the token is replaced shortly
// before it expires; once a VM holds it, it is left to expire.
func TestJoinTokenOfAQueuedRunnerIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startBootstrapController(t, newCANamespace(t))
	ns := newNamespace(t)
	short := func(bc *bootstrapv1.BootstrapConfig) {
		bc.Spec.Attestation.JoinTokenTTL = &metav1.Duration{Duration: 9 * time.Second} // replaced 3 s before expiry
	}
	_, _, queued := runnerMachine(t, ns, "queued", "pool", true, short)
	_, configured := runnerMachineInCluster(t, ns, "configured", "pool", short)
	// The second runner's claim has configured its VM with the first token.
	claim := builder.NewMachineClaim("configured", ns).WithHypervisorCluster("pve").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	claim.Status.CompletedStep = infrav1.StepConfigured
	g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())

	first := map[string]string{}
	for _, bc := range []*bootstrapv1.BootstrapConfig{queued, configured} {
		g.Eventually(func(g Gomega) {
			get(g, bc)
			g.Expect(bc.Status.JoinToken).NotTo(BeNil())
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		first[bc.Name] = bc.Status.JoinToken.SHA256
	}
	// The queued runner's first token, as whoever read its Secret before the refresh holds it.
	// The token's hash is recorded before the Secret carrying it is written: wait for the Secret.
	var oldCfg *agent.Config
	g.Eventually(func(g Gomega) {
		oldSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns}}
		get(g, oldSecret)
		cfg, err := agent.ConfigFromUserData(oldSecret.Data["value"], agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(identity.JoinTokenMatches(cfg.JoinToken, first["queued"])).To(BeTrue())
		oldCfg = cfg
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// The queued runner (its claim does not exist yet, so no VM) gets a new token before the old one expires.
	g.Eventually(func(g Gomega) {
		get(g, queued)
		g.Expect(queued.Status.JoinToken).NotTo(BeNil())
		g.Expect(queued.Status.JoinToken.SHA256).NotTo(Equal(first["queued"]))
		g.Expect(conditions.GetReason(queued, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.WaitingForAttestationReason))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns}}
		get(g, secret)
		cfg, err := agent.ConfigFromUserData(secret.Data["value"], agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(identity.JoinTokenMatches(cfg.JoinToken, queued.Status.JoinToken.SHA256)).To(BeTrue(), "the Secret carries the new token")
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	// The bootstrap service redeems a token only against the recorded hash: the old one is dead.
	g.Expect(identity.JoinTokenMatches(oldCfg.JoinToken, queued.Status.JoinToken.SHA256)).To(BeFalse(), "the replaced token no longer redeems")

	// The configured runner's token is never replaced: it expires.
	g.Eventually(func(g Gomega) {
		get(g, configured)
		g.Expect(conditions.GetReason(configured, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.TokenExpiredReason))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(configured.Status.JoinToken.SHA256).To(Equal(first["configured"]))
}
