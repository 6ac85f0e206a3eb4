package security

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
)

// TestBootstrapServiceSecretsAreItsCAAlone plays a compromised bootstrap service (the process VMs
// talk to) going after the other Secrets of the installation's namespace, e.g. the webhook secret,
// and the CA Secret other than by reading it: it can create its CA and read it by name, nothing more.
func TestBootstrapServiceSecretsAreItsCAAlone(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	bootstrap, err := client.New(inst.BootstrapService, client.Options{Scheme: api.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = builtin.LoadOrCreateCA(ctx, bootstrap, inst.CASecret, spiffeid.RequireTrustDomainFromString("hyperfleet.local"))
	g.Expect(err).NotTo(HaveOccurred(), "it creates and reads its CA")

	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: "hyperfleet-webhook-secret"},
		StringData: map[string]string{"secret": "the webhook's HMAC key"}}
	if err := env.Client.Create(ctx, other); err != nil {
		g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
	}
	ca := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, inst.CASecret, ca)).To(Succeed())
	for _, tt := range []struct {
		name string
		try  func() error
	}{
		{name: "get another Secret", try: func() error { return bootstrap.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}) }},
		{name: "list Secrets", try: func() error { return bootstrap.List(ctx, &corev1.SecretList{}, client.InNamespace(inst.Namespace)) }},
		{name: "update the CA Secret", try: func() error { return bootstrap.Update(ctx, ca.DeepCopy()) }},
		{name: "delete the CA Secret", try: func() error { return bootstrap.Delete(ctx, ca.DeepCopy()) }},
		{name: "delete another Secret", try: func() error { return bootstrap.Delete(ctx, other.DeepCopy()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.try()
			NewWithT(t).Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want forbidden, got %v", err)
		})
	}
}
