package connection

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// namedProvider is a hypervisor.Provider that says which builder made it; its methods are never called.
type namedProvider struct {
	hypervisor.Provider
	builtBy string
}

// wrapped records the labels the registry decorates a provider with.
type wrapped struct {
	hypervisor.Provider
	providerLabel, cluster string
}

// otherKind stands for a second provider package: it reads the same credentials Secret.
type otherKind struct{}

func (otherKind) Config(ctx context.Context, src Source) (Config, error) {
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	return otherConfig(creds.Data[KeyUsername]), nil
}

type otherConfig string

// tokenKind stands for the Proxmox builder, which this package must not import: it reads the API
// token from the same Secret.
type tokenKind struct{}

func (tokenKind) Config(ctx context.Context, src Source) (Config, error) {
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	return namedConfig{hash: string(creds.Data[KeyTokenID]), name: "proxmox:" + string(creds.Data[KeyTokenID])}, nil
}

func (c otherConfig) Hash() string { return string(c) }
func (c otherConfig) Build() (hypervisor.Provider, error) {
	return namedProvider{builtBy: "other:" + string(c)}, nil
}

const hyperV = infrav1.ProviderHyperV

func TestRegistryBuildsByProvider(t *testing.T) {
	tests := []struct {
		name     string
		provider infrav1.ProviderType
		setup    func(r *Registry)
		// builtBy and label are the expected builder and metrics label; reason, when set, the
		// expected condition reason instead.
		builtBy, label string
		reason         string
		message        []string
	}{
		{name: "an unset provider is Proxmox", provider: "", builtBy: "proxmox:root@pam!ci", label: "proxmox"},
		{name: "Proxmox", provider: infrav1.ProviderProxmox, builtBy: "proxmox:root@pam!ci", label: "proxmox"},
		{name: "a registered second kind gets its own builder", provider: hyperV,
			setup:   func(r *Registry) { r.Register(hyperV, otherKind{}) },
			builtBy: "other:admin", label: "hyperv"},
		{name: "an unknown kind is refused before any Secret is read", provider: hyperV,
			reason: infrav1.HypervisorClusterUnsupportedProviderReason, message: []string{`"hyperv"`, "supported: Proxmox"}},
		{name: "an unregistered Proxmox is refused", provider: infrav1.ProviderProxmox,
			setup:  func(r *Registry) { r.Register(infrav1.ProviderProxmox, nil) },
			reason: infrav1.HypervisorClusterUnsupportedProviderReason, message: []string{`"Proxmox"`, "supported: none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "creds"}, Data: map[string][]byte{
				KeyTokenID: []byte("root@pam!ci"), KeyTokenSecret: []byte("s3cret"),
				KeyUsername: []byte("admin"), KeyPassword: []byte("pw"),
			}}
			reader := fake.NewClientBuilder().WithObjects(creds).Build()
			r := NewRegistry(reader, 0, map[infrav1.ProviderType]ProviderBuilder{infrav1.ProviderProxmox: tokenKind{}})
			r.Wrap = func(p hypervisor.Provider, label, cluster string) hypervisor.Provider {
				return wrapped{Provider: p, providerLabel: label, cluster: cluster}
			}
			if tt.setup != nil {
				tt.setup(r)
			}
			hc := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "hv-a"},
				Spec: infrav1.HypervisorClusterSpec{Provider: tt.provider, Endpoint: "https://hv.example:8006",
					InstallationID: "abcdefgh12345678", CredentialsRef: infrav1.LocalSecretReference{Name: "creds"}}}
			if tt.reason != "" {
				// Without the Secret, reading it would fail with CredentialsNotFound instead.
				g.Expect(reader.Delete(context.Background(), creds)).To(Succeed())
			}

			p, err := r.Get(context.Background(), hc)
			if tt.reason != "" {
				g.Expect(err).To(HaveOccurred())
				g.Expect(ReasonOf(err)).To(Equal(tt.reason), "the HypervisorCluster's Available reason")
				for _, m := range tt.message {
					g.Expect(err.Error()).To(ContainSubstring(m))
				}
				g.Expect(p).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p).To(Equal(wrapped{Provider: namedProvider{builtBy: tt.builtBy}, providerLabel: tt.label, cluster: "fleet/hv-a"}))
		})
	}
}

// A HypervisorCluster whose provider kind changes gets a client of the new kind, even when both
// kinds' configurations hash alike.
func TestRegistryRebuildsWhenTheProviderKindChanges(t *testing.T) {
	g := NewWithT(t)
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "creds"},
		Data: map[string][]byte{KeyUsername: []byte("admin"), KeyPassword: []byte("pw")}}
	r := NewRegistry(fake.NewClientBuilder().WithObjects(creds).Build(), 0, nil)
	const otherKindToo infrav1.ProviderType = "Other"
	r.Register(hyperV, otherKind{})
	r.Register(otherKindToo, otherKind{})
	hc := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "hv-a"},
		Spec: infrav1.HypervisorClusterSpec{Provider: hyperV, Endpoint: "https://hv.example",
			InstallationID: "abcdefgh12345678", CredentialsRef: infrav1.LocalSecretReference{Name: "creds"}}}
	first, err := r.Get(context.Background(), hc)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := r.Get(context.Background(), hc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(first), "cached while nothing changes")

	hc.Spec.Provider = otherKindToo
	r.Register(otherKindToo, kindNamed("rebuilt"))
	rebuilt, err := r.Get(context.Background(), hc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rebuilt).To(Equal(namedProvider{builtBy: "rebuilt"}))
}

// kindNamed builds a provider named after it with the same configuration hash as otherKind.
type kindNamed string

func (k kindNamed) Config(ctx context.Context, src Source) (Config, error) {
	return namedConfig{hash: "admin", name: string(k)}, nil
}

type namedConfig struct{ hash, name string }

func (c namedConfig) Hash() string                        { return c.hash }
func (c namedConfig) Build() (hypervisor.Provider, error) { return namedProvider{builtBy: c.name}, nil }
