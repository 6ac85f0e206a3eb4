package bootstrapconfig_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// TestBootstrapConfigWithoutServiceURL: with no address for the bootstrap service anywhere, the
// config says so and no join token is minted (one minted for data that cannot be rendered would be
// spent for nothing).
func TestBootstrapConfigWithoutServiceURL(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.BootstrapServiceURL = "" })
	ns := controllertest.NewNamespace(t)
	_, _, bc := runnerMachine(t, ns, "no-url", "pool", true, nil)
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, bc)
		g.Expect(conditions.GetReason(got, bootstrapv1.DataSecretAvailableCondition)).To(Equal(bootstrapv1.DataSecretFailedReason))
		g.Expect(conditions.GetMessage(got, bootstrapv1.DataSecretAvailableCondition)).To(ContainSubstring("BOOTSTRAP_SERVICE_URL"))
		g.Expect(got.Status.JoinToken).To(BeNil())
		g.Expect(got.Status.DataSecretName).To(BeNil())
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}
