package hyperv

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/module"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// injectedCommand is what the attacker wants run on a shared host under the cluster's account,
// past the module's ownership checks: another team's VM turned off.
const injectedCommand = "Stop-VM -Name team-b-db -TurnOff -Force"

// injectedPath ends PowerShell's single-quoted string with a typographic quote (U+2019), runs
// injectedCommand and opens a new string for the rest of the script. It passed the old CRD
// pattern and the provider's old check, which knew only the ASCII quote.
const injectedPath = `C:\HF` + "\u2019; " + injectedCommand + "; \u2019" + `x`

// TestPathsCannotInjectPowerShell plays a namespace user who may create a HypervisorCluster and
// writes a path that would end the string it is quoted in. The manager (and the console's
// inventory) must run no command of theirs on any host: a HypervisorCluster carrying such a path
// is refused at connect time, before any script is sent, for objects stored before the API
// refused them; and a path that got past that check still reaches the host as data only.
func TestPathsCannotInjectPowerShell(t *testing.T) {
	t.Run("refused at connect", func(t *testing.T) {
		for field, set := range map[string]func(*infrav1.HyperVClusterParameters, string){
			"modulePath":   func(p *infrav1.HyperVClusterParameters, v string) { p.ModulePath = v },
			"seedISOPath":  func(p *infrav1.HyperVClusterParameters, v string) { p.SeedISOPath = v },
			"vmPath":       func(p *infrav1.HyperVClusterParameters, v string) { p.VMPath = v },
			"vhdPath":      func(p *infrav1.HyperVClusterParameters, v string) { p.VHDPath = v },
			"templatePath": func(p *infrav1.HyperVClusterParameters, v string) { p.TemplatePath = v },
		} {
			for name, path := range map[string]string{
				"right single quote":   injectedPath,
				"left single quote":    "C:\\HF\u2018; " + injectedCommand + "; \u2018x",
				"low-9 quote":          "C:\\HF\u201a; " + injectedCommand + "; \u201ax",
				"reversed-9 quote":     "C:\\HF\u201b; " + injectedCommand + "; \u201bx",
				"typographic double":   "C:\\HF\u201c$(" + injectedCommand + ")\u201d",
				"line break":           "C:\\HF\n" + injectedCommand,
				"UNC share with quote": `\\fs` + "\u2019; " + injectedCommand + "; \u2019" + `\share`,
			} {
				t.Run(field+"/"+name, func(t *testing.T) {
					g := NewWithT(t)
					sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "hv1")
					hv := &infrav1.HyperVClusterParameters{Hosts: []infrav1.HyperVHost{{Name: "hv1", Endpoint: sim.Servers["hv1"].URL()}}}
					set(hv, path)
					registry := connection.NewRegistry(simSecrets(sim), 10*time.Second,
						map[infrav1.ProviderType]connection.ProviderBuilder{infrav1.ProviderHyperV: Connector{}})

					p, err := registry.Get(testCtx(t), storedCluster(hv))
					if err == nil {
						// What the console's inventory and the manager's connection check do next.
						_, _ = p.Nodes(testCtx(t))
					}
					g.Expect(sim.ForeignStatements("hv1")).NotTo(ContainElement(HavePrefix(injectedCommand)), "the injected command ran")
					g.Expect(sim.ForeignStatements("hv1")).To(BeEmpty(), "statements beyond HyperFleet's scripts")
					g.Expect(err).To(HaveOccurred(), "a path PowerShell could read as the end of a string is refused")
					g.Expect(connection.ReasonOf(err)).To(Equal(infrav1.HypervisorClusterUnsupportedSettingReason))
					g.Expect(sim.Calls()).To(BeEmpty(), "nothing was sent to the host")
				})
			}
		}
	})

	t.Run("data only past the check", func(t *testing.T) {
		g := NewWithT(t)
		env := newEnv(t, hvsim.HyperVConfig{})
		// Stands for a gap in the connect-time check: the quoting alone must hold.
		env.p.cfg.ModuleRoot = injectedPath
		env.p.cfg.SeedDirectory = injectedPath + `\Seeds`

		_, err := env.p.Verify(testCtx(t))
		for _, h := range env.hosts {
			g.Expect(env.hv.ForeignStatements(h)).NotTo(ContainElement(HavePrefix(injectedCommand)), "the injected command ran on %s", h)
			g.Expect(env.hv.ForeignStatements(h)).To(BeEmpty(), "statements beyond HyperFleet's scripts on %s", h)
		}
		g.Expect(err).NotTo(HaveOccurred())
		for _, h := range env.hosts {
			psm, ok := env.hv.File(h, injectedPath+`\`+module.Name+`\`+module.Version+`\`+module.Name+".psm1")
			g.Expect(ok).To(BeTrue(), "the module went to the folder named, character for character, on %s", h)
			g.Expect(psm.Data).To(Equal(module.Script()))
		}
	})
}

// simSecrets holds the credentials and CA bundle Secrets of storedCluster, for the simulator's
// hosts.
func simSecrets(sim *hvsim.HyperVHosts) client.Reader {
	return fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creds"},
			Data: map[string][]byte{connection.KeyUsername: []byte(hvsim.HyperVTestUser), connection.KeyPassword: []byte(hvsim.HyperVTestPassword)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca"}, Data: map[string][]byte{"ca.crt": sim.CAPEM}},
	).Build()
}

// storedCluster is a HypervisorCluster as it could be stored before the API refused quotes in
// paths.
func storedCluster(hv *infrav1.HyperVClusterParameters) *infrav1.HypervisorCluster {
	return &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hv"},
		Spec: infrav1.HypervisorClusterSpec{Provider: infrav1.ProviderHyperV, Endpoint: hv.Hosts[0].Endpoint, HyperV: hv,
			InstallationID: "abcdefgh12345678", CredentialsRef: infrav1.LocalSecretReference{Name: "creds"},
			CABundleRef: &infrav1.SecretKeyReference{Name: "ca"}}}
}
