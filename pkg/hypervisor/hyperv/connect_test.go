package hyperv

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// built is what the Connector handed to Build.
type built struct {
	hypervisor.Provider
	cfg Config
}

// TestConnectorReadsTheHypervisorCluster: hosts, auth and paths come from spec.hyperv, the
// credentials from the Secret; what HyperFleet cannot use is refused with a condition reason.
func TestConnectorReadsTheHypervisorCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   func(*infrav1.HypervisorClusterSpec)
		data   map[string][]byte
		want   func(Gomega, Config)
		reason string
	}{
		{name: "hosts and paths from spec.hyperv", spec: func(s *infrav1.HypervisorClusterSpec) {
			s.HyperV = &infrav1.HyperVClusterParameters{
				Hosts: []infrav1.HyperVHost{{Name: "hv1", Endpoint: "https://hv1.corp:5986/wsman"}, {Name: "hv2", Endpoint: "https://hv2.corp:5986/wsman"}},
				Auth:  infrav1.HyperVAuthBasic, VHDPath: `D:\Runners\Disks`, SeedISOPath: `D:\Runners\Seeds`, ModulePath: `D:\HyperFleet\Modules`,
				SecureBootTemplate: "MicrosoftWindows",
			}
		}, want: func(g Gomega, c Config) {
			g.Expect(c.Hosts).To(Equal([]Host{{"hv1", "https://hv1.corp:5986/wsman"}, {"hv2", "https://hv2.corp:5986/wsman"}}))
			g.Expect(c.Auth).To(Equal("basic"))
			g.Expect(c.VHDDirectory).To(Equal(`D:\Runners\Disks`))
			g.Expect(c.SeedDirectory).To(Equal(`D:\Runners\Seeds`))
			g.Expect(c.ModuleRoot).To(Equal(`D:\HyperFleet\Modules`))
			g.Expect(c.SecureBootTemplate).To(Equal("MicrosoftWindows"))
			g.Expect(c.Username).To(Equal(`CORP\hyperfleet`))
			g.Expect(c.Password).To(Equal("pw"))
			g.Expect(c.CABundle).To(Equal([]byte("PEM")))
			g.Expect(c.Cluster).To(Equal("fleet/hv-a"))
			g.Expect(c.InstallationID).To(Equal("abcdefgh12345678"))
		}},
		{name: "one host from spec.endpoint", want: func(g Gomega, c Config) {
			g.Expect(c.Hosts).To(Equal([]Host{{"hv9", "https://hv9.corp:5986/wsman"}}))
		}},
		{name: "an API token is no Hyper-V credential", data: map[string][]byte{connection.KeyTokenID: []byte("a@pve!b"), connection.KeyTokenSecret: []byte("c")},
			reason: infrav1.HypervisorClusterCredentialsInvalidReason},
		{name: "plain http without allowInsecureHTTP", spec: func(s *infrav1.HypervisorClusterSpec) {
			s.HyperV = &infrav1.HyperVClusterParameters{Hosts: []infrav1.HyperVHost{{Name: "hv1", Endpoint: "http://hv1.corp:5985/wsman"}}}
		}, reason: infrav1.HypervisorClusterUnsupportedSettingReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data := tc.data
			if data == nil {
				data = map[string][]byte{connection.KeyUsername: []byte(`CORP\hyperfleet`), connection.KeyPassword: []byte("pw")}
			}
			reader := fake.NewClientBuilder().WithObjects(
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "creds"}, Data: data},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "ca"}, Data: map[string][]byte{"ca.crt": []byte("PEM")}},
			).Build()
			var got Config
			r := connection.NewRegistry(reader, 0, map[infrav1.ProviderType]connection.ProviderBuilder{
				infrav1.ProviderHyperV: Connector{Build: func(c Config) (hypervisor.Provider, error) { got = c; return built{cfg: c}, nil }},
			})
			hc := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "hv-a"},
				Spec: infrav1.HypervisorClusterSpec{Provider: infrav1.ProviderHyperV, Endpoint: "https://hv9.corp:5986/wsman",
					InstallationID: "abcdefgh12345678", CredentialsRef: infrav1.LocalSecretReference{Name: "creds"},
					CABundleRef: &infrav1.SecretKeyReference{Name: "ca"}}}
			if tc.spec != nil {
				tc.spec(&hc.Spec)
			}
			_, err := r.Get(context.Background(), hc)
			if tc.reason != "" {
				g.Expect(err).To(HaveOccurred())
				g.Expect(connection.ReasonOf(err)).To(Equal(tc.reason), err.Error())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.want(g, got)
		})
	}
}
