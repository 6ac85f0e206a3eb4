package security

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
)

// TestIdentityCAIsTheBootstrapServices: the identity CA's key signs every VM's SVID. Only the
// bootstrap service may create it; the manager, which only hands VMs the certificate, may read it and
// nothing else of the installation's namespace.
func TestIdentityCAIsTheBootstrapServices(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	td := spiffeid.RequireTrustDomainFromString("hyperfleet.local")
	clientOf := func(cfg *rest.Config) client.Client {
		c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	manager, bootstrap := clientOf(inst.Manager), clientOf(inst.BootstrapService)
	existing := &corev1.Secret{}
	if err := env.Client.Get(ctx, inst.CASecret, existing); err == nil {
		g.Expect(env.Client.Delete(ctx, existing)).To(Succeed())
	} else {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}

	_, err := builtin.LoadOrCreateCA(ctx, manager, inst.CASecret, td)
	g.Expect(err).To(MatchError(ContainSubstring("only the bootstrap service may create it")))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue())

	created, err := builtin.LoadOrCreateCA(ctx, bootstrap, inst.CASecret, td)
	g.Expect(err).NotTo(HaveOccurred())
	loaded, err := builtin.LoadOrCreateCA(ctx, manager, inst.CASecret, td)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.BundlePEM()).To(Equal(created.BundlePEM()))
}
