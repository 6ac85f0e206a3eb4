package bootstrapconfig_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// TestBootstrapConfigTPM renders bootstrap data for method TPM: a join token as for JoinToken, and
// an agent told to prove its TPM too (the bootstrap service refuses the token alone).
func TestBootstrapConfigTPM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startBootstrapController(t, newCANamespace(t))
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	fleet := bootstraptest.NewFleet(t, controllertest.Env.Client, gh)
	cluster := &clusterv1.Cluster{}
	g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: bootstraptest.ClusterName}, cluster)).To(Succeed())
	setInfrastructureProvisioned(t, cluster)
	_, bc := runnerMachineInCluster(t, fleet.Namespace, "tpm-1", fleet.Pool.Name, func(bc *bootstrapv1.BootstrapConfig) {
		bc.Spec.Attestation.Method = bootstrapv1.AttestationTPM
	})
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, bc).Status.DataSecretName).NotTo(BeNil())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	secret := controllertest.Get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tpm-1", Namespace: fleet.Namespace}})
	cfg, err := agent.ConfigFromUserData(secret.Data["value"], agent.DefaultConfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Attestation).To(Equal(agent.AttestationTPM))
	g.Expect(cfg.JoinToken).NotTo(BeEmpty())
}
