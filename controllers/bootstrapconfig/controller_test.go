package bootstrapconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestBootstrapConfigRendersDataSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startBootstrapController(t, newCANamespace(t))
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	fleet := bootstraptest.NewFleet(t, controllertest.Env.Client, gh)
	// An installation token exists on the fake: it must never show up in bootstrap data.
	installationToken := controllertest.MintInstallationToken(t, gh, fleet.Repo)
	cluster := &clusterv1.Cluster{}
	g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: bootstraptest.ClusterName}, cluster)).To(Succeed())
	setInfrastructureProvisioned(t, cluster)
	errorsBefore := reconcileErrors("bootstrapconfig")
	m, bc := runnerMachineInCluster(t, fleet.Namespace, "runner-1", fleet.Pool.Name, func(bc *bootstrapv1.BootstrapConfig) {
		bc.Spec.UserData = "#cloud-config\npackages: [git]\n"
		bc.Spec.Runner.IdleTimeout = &metav1.Duration{Duration: 7 * time.Minute}
	})

	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(bc.Status.DataSecretName).To(Equal(ptr.To("runner-1")))
		g.Expect(bc.Status.Initialization).NotTo(BeNil())
		g.Expect(bc.Status.Initialization.DataSecretCreated).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(bc, bootstrapv1.ReadyCondition)).To(BeTrue())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(reconcileErrors("bootstrapconfig")-errorsBefore).To(BeZero(), "minting the token and writing the Secret take one clean reconcile, not a conflict and a retry")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "runner-1", Namespace: fleet.Namespace}}
	controllertest.Get(g, secret)
	g.Expect(secret.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, bootstraptest.ClusterName))
	g.Expect(metav1.IsControlledBy(secret, bc)).To(BeTrue())
	g.Expect(string(secret.Data["format"])).To(Equal("cloud-config"))
	userData := secret.Data["value"]
	g.Expect(string(userData)).To(ContainSubstring("packages"), "spec.userData is merged under the rendered data")

	cfg, err := agent.ConfigFromUserData(userData, agent.DefaultConfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.ServiceURL).To(Equal("https://bootstrap.hyperfleet.test:8443"))
	g.Expect(cfg.TrustDomain).To(Equal("hyperfleet.test"))
	g.Expect(cfg.CABundle).To(HavePrefix("-----BEGIN CERTIFICATE-----"))
	g.Expect(cfg.Machine).To(Equal(m.Name))
	g.Expect(cfg.Runner.Labels).To(ConsistOf(fleet.Labels), "normalized: lower-cased and sorted")
	g.Expect(cfg.Runner.Platform).To(Equal("github"))
	g.Expect(cfg.Runner.IdleTimeout.Duration).To(Equal(7 * time.Minute))
	g.Expect(identity.JoinTokenMatches(cfg.JoinToken, bc.Status.JoinToken.SHA256)).To(BeTrue(), "the token in the Secret is the one recorded")
	g.Expect(bc.Status.SPIFFEID).To(Equal("spiffe://hyperfleet.test/hyperfleet/machine/" + fleet.Namespace + "/runner-1"))
	g.Expect(bc.Status.TokenExpirationTime.Time).To(BeTemporally("~", time.Now().Add(15*time.Minute), time.Minute))

	// No GitHub credential, in the Secret or in the decoded agent config.
	rendered, err := cfg.Marshal()
	g.Expect(err).NotTo(HaveOccurred())
	appKey := strings.TrimSpace(string(gh.AppKeyPEM()))
	keyBody := strings.Split(appKey, "\n")[1]
	for _, blob := range []string{string(userData), string(rendered)} {
		g.Expect(blob).NotTo(ContainSubstring(keyBody))
		g.Expect(blob).NotTo(ContainSubstring("PRIVATE KEY"))
		g.Expect(blob).NotTo(ContainSubstring(installationToken))
		g.Expect(blob).NotTo(ContainSubstring("ghs_"))
	}

	// The token is minted once: later reconciles keep the Secret as it is.
	before := string(secret.Data["value"])
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc).Annotations = map[string]string{"touch": "1"}
		g.Expect(controllertest.Env.Client.Update(ctx, bc)).To(Succeed())
	}, 10*time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		controllertest.Get(g, secret)
		g.Expect(string(secret.Data["value"])).To(Equal(before))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

func TestBootstrapConfigWaitsForClusterInfrastructure(t *testing.T) {
	g := NewWithT(t)
	startBootstrapController(t, newCANamespace(t))
	ns := controllertest.NewNamespace(t)
	cluster, _, bc := runnerMachine(t, ns, "waiting", "pool", false, nil)
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(conditions.GetReason(bc, bootstrapv1.DataSecretAvailableCondition)).To(Equal(bootstrapv1.WaitingForClusterReason))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(bc.Status.DataSecretName).To(BeNil())
	setInfrastructureProvisioned(t, cluster)
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, bc).Status.DataSecretName).To(Equal(ptr.To("waiting")))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}

func TestBootstrapConfigWaitsForOwnerMachine(t *testing.T) {
	g := NewWithT(t)
	startBootstrapController(t, newCANamespace(t))
	ns := controllertest.NewNamespace(t)
	bc := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns}}
	g.Expect(controllertest.Env.Client.Create(context.Background(), bc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(conditions.GetReason(bc, bootstrapv1.DataSecretAvailableCondition)).To(Equal(bootstrapv1.WaitingForOwnerMachineReason))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(bc.Status.DataSecretName).To(BeNil())
}

func TestBootstrapConfigHonoursPause(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startBootstrapController(t, newCANamespace(t))
	ns := controllertest.NewNamespace(t)
	cluster, _, bc := runnerMachine(t, ns, "paused", "pool", true, func(bc *bootstrapv1.BootstrapConfig) {
		bc.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"}
	})
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(conditions.IsTrue(bc, bootstrapv1.PausedCondition)).To(BeTrue())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, bc).Status.DataSecretName).To(BeNil())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// Unpausing the object while the Cluster is paused still waits.
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, cluster).Spec.Paused = ptr.To(true)
		g.Expect(controllertest.Env.Client.Update(ctx, cluster)).To(Succeed())
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		delete(controllertest.Get(g, bc).Annotations, clusterv1.PausedAnnotation)
		g.Expect(controllertest.Env.Client.Update(ctx, bc)).To(Succeed())
	}, 10*time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(bc.Status.DataSecretName).To(BeNil())
		g.Expect(conditions.IsTrue(bc, bootstrapv1.PausedCondition)).To(BeTrue())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	g.Eventually(func(g Gomega) {
		controllertest.Get(g, cluster).Spec.Paused = nil
		g.Expect(controllertest.Env.Client.Update(ctx, cluster)).To(Succeed())
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		controllertest.Get(g, bc)
		g.Expect(bc.Status.DataSecretName).To(Equal(ptr.To("paused")))
		g.Expect(conditions.IsFalse(bc, bootstrapv1.PausedCondition)).To(BeTrue())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
