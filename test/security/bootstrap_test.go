package security

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestBootstrapServiceReadsPoolCredentialsOnlyWhereEnabled: the bootstrap service, with its shipped
// RBAC, can read the GitHub App of a pool in an enabled namespace to mint a runner config, and is
// refused (the VM gets a retryable 503 and nothing else) for a pool in any other namespace.
func TestBootstrapServiceReadsPoolCredentialsOnlyWhereEnabled(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	const enabled, notEnabled = "pool-enabled", "pool-not-enabled"
	g.Expect(enable(ctx, enabled)).To(Succeed())
	g.Expect(createNamespace(ctx, notEnabled)).To(Succeed())
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	for _, ns := range []string{enabled, notEnabled} {
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
			Data:       map[string][]byte{"app-id": []byte("123"), "private-key": keyPEM, "installation-id": []byte("456")},
		}))).To(Succeed())
	}
	c, err := client.New(inst.BootstrapService, client.Options{Scheme: api.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	platforms, err := platform.NewSource(platform.Inputs{Reader: c})
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		namespace string
		allowed   bool
	}{{enabled, true}, {notEnabled, false}} {
		t.Run(tc.namespace, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := platforms.Platform(ctx, builder.NewRunnerPool("linux", tc.namespace).Build())
			if tc.allowed {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(errors.Is(err, tenancy.ErrNamespaceNotEnabled)).To(BeTrue(), "got %v", err)
		})
	}
}
