package spire

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// TestSPIREBootstrapData checks what cloud-init gives a SPIRE VM: the join token goes to
// spire-agent only, which starts before the HyperFleet agent. (That spire-agent attests with this
// config is shown against a real server in TestProvisionerWithRealSPIRE.)
func TestSPIREBootstrapData(t *testing.T) {
	g := NewWithT(t)
	id, _ := identity.MachineID(td, "runners", "runner-a")
	in := bootstrap.Input{
		Namespace: "runners", Machine: "runner-a", ServiceURL: "https://bootstrap.hyperfleet.test:8443",
		TrustDomain: td.Name(), TrustBundlePEM: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
		Credential: identity.Credential{ID: id, JoinToken: "0b6b4a5e-token", ExpiresAt: time.Now().Add(time.Minute)},
		SPIRE:      &bootstrap.SPIREAgent{ServerAddress: "spire-server.spire.svc:8081"},
	}
	userData, err := bootstrap.RenderUserData(in)
	g.Expect(err).NotTo(HaveOccurred())

	var doc struct {
		WriteFiles []struct {
			Path        string `json:"path"`
			Permissions string `json:"permissions"`
			Content     string `json:"content"`
		} `json:"write_files"`
		RunCmd [][]string `json:"runcmd"`
	}
	g.Expect(yaml.Unmarshal([]byte(strings.TrimPrefix(userData, "#cloud-config\n")), &doc)).To(Succeed())
	files := map[string]string{}
	for _, f := range doc.WriteFiles {
		files[f.Path] = f.Permissions
		switch f.Path {
		case bootstrap.SPIREAgentConfigPath:
			g.Expect(f.Content).To(ContainSubstring(`join_token = "0b6b4a5e-token"`))
			g.Expect(f.Content).To(ContainSubstring(`server_address = "spire-server.spire.svc"`))
			g.Expect(f.Content).To(ContainSubstring(`server_port = "8081"`))
			g.Expect(f.Content).To(ContainSubstring(`trust_domain = "hyperfleet.test"`))
		case bootstrap.SPIREAgentBundlePath:
			g.Expect(f.Content).To(Equal(string(in.TrustBundlePEM)))
		case bootstrap.AgentUnitPath:
			g.Expect(f.Content).To(ContainSubstring("spire-agent.service"))
		}
	}
	g.Expect(files).To(HaveKeyWithValue(bootstrap.SPIREAgentConfigPath, "0600"), "the config holds the join token")
	g.Expect(files).To(HaveKey(bootstrap.SPIREAgentBundlePath))
	g.Expect(files).To(HaveKey(bootstrap.SPIREAgentUnitPath))
	g.Expect(doc.RunCmd).To(HaveExactElements(
		[]string{"systemctl", "daemon-reload"},
		[]string{"systemctl", "enable", "--now", "--no-block", "spire-agent.service"},
		[]string{"systemctl", "enable", "--now", "--no-block", "hyperfleet-agent.service"},
	))

	cfg, err := agent.ConfigFromUserData([]byte(userData), agent.DefaultConfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.JoinToken).To(BeEmpty(), "the token is spire-agent's alone")
	g.Expect(cfg.Attestation).To(Equal(agent.AttestationSPIRE))
	g.Expect(cfg.WorkloadAPIAddress).To(Equal("unix://" + bootstrap.SPIREWorkloadAPISocket))
	g.Expect(cfg.SPIREAgentConfigPath).To(Equal(bootstrap.SPIREAgentConfigPath), "the agent scrubs the spent token there")
	g.Expect(cfg.CABundle).To(Equal(string(in.TrustBundlePEM)))

	in.SPIRE.ServerAddress = "unix:///run/spire/server/api.sock"
	_, err = bootstrap.RenderUserData(in)
	g.Expect(err).To(MatchError(ContainSubstring("must be host:port")))
}
