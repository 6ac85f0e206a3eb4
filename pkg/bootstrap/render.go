package bootstrap

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// Paths inside the VM.
const (
	DefaultAgentBinaryPath = "/usr/local/bin/hyperfleet-agent"
	AgentUnitPath          = "/etc/systemd/system/hyperfleet-agent.service"
	// DefaultJoinTokenTTL bounds how long a VM may take from rendering to attestation.
	DefaultJoinTokenTTL = 15 * time.Minute
	// MaxJoinTokenTTL caps spec.attestation.joinTokenTTL (the API refuses more; objects stored
	// before that rule are capped here).
	MaxJoinTokenTTL = 24 * time.Hour
)

// Format is the data Secret's format key value.
const Format = "cloud-config"

// Input is everything the bootstrap data of one VM is made from.
type Input struct {
	Namespace string
	Machine   string
	Spec      bootstrapv1.BootstrapConfigSpec
	// ServiceURL is the bootstrap service, spec.bootstrapServiceURL or the operator default.
	ServiceURL string
	// TrustDomain of the VM's identity.
	TrustDomain    string
	TrustBundlePEM []byte
	Credential     identity.Credential
	// Platform and Labels come from the RunnerPool, when the Machine belongs to one.
	Platform string
	Labels   []string
	// SPIRE, when set, makes the VM attest to a SPIRE server with spire-agent: the join token in
	// Credential is spire-agent's, not the HyperFleet agent's.
	SPIRE *SPIREAgent
}

// SPIREAgent is what a VM's spire-agent needs to attest with a join token.
type SPIREAgent struct {
	// ServerAddress is host:port of the SPIRE server as VMs reach it.
	ServerAddress string
}

// RenderUserData returns the #cloud-config that installs and starts the agent, with
// spec.userData merged under it (the rendered part wins on conflicts).
func RenderUserData(in Input) (string, error) {
	if in.ServiceURL == "" {
		return "", errors.New("no bootstrap service URL: set spec.bootstrapServiceURL or the operator's default")
	}
	if !strings.HasPrefix(in.ServiceURL, "https://") {
		return "", fmt.Errorf("bootstrap service URL %q must be https://", in.ServiceURL)
	}
	agentYAML, err := AgentConfig(in).Marshal()
	if err != nil {
		return "", err
	}
	bin := in.Spec.Agent.BinaryPath
	if bin == "" {
		bin = DefaultAgentBinaryPath
	}
	files := []any{
		map[string]any{"path": protocol.DefaultConfigPath, "permissions": "0600", "owner": "root:root",
			"encoding": "b64", "content": base64.StdEncoding.EncodeToString(agentYAML)},
		map[string]any{"path": AgentUnitPath, "permissions": "0644", "owner": "root:root", "content": agentUnit(bin, in.SPIRE != nil)},
	}
	cmds := runCommands(in.Spec.Agent, bin)
	if in.SPIRE != nil {
		spireFiles, err := spireAgentFiles(in)
		if err != nil {
			return "", err
		}
		files = append(files, spireFiles...)
		// spire-agent first: it holds the token and serves the Workload API the agent uses.
		cmds = append(cmds[:len(cmds)-1], []any{"systemctl", "enable", "--now", "--no-block", "spire-agent.service"}, cmds[len(cmds)-1])
	}
	doc := map[string]any{"write_files": files, "runcmd": cmds}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	rendered := "#cloud-config\n" + string(out)
	merged, err := cloudinit.Merge(in.Spec.UserData, rendered)
	if err != nil {
		return "", fmt.Errorf("merging spec.userData: %w", err)
	}
	return merged, nil
}

// AgentConfig is the agent's configuration file for in.
func AgentConfig(in Input) *protocol.AgentConfig {
	r := in.Spec.Runner
	token := in.Credential.JoinToken
	if in.SPIRE != nil {
		token = "" // spire-agent redeems it; the HyperFleet agent must never present it
	}
	cfg := &protocol.AgentConfig{
		ServiceURL:  in.ServiceURL,
		TrustDomain: in.TrustDomain,
		CABundle:    string(in.TrustBundlePEM),
		JoinToken:   token,
		Namespace:   in.Namespace,
		Machine:     in.Machine,
		Runner: protocol.RunnerSetup{
			Platform: in.Platform, Labels: in.Labels, OS: r.OS, Arch: r.Arch,
			DownloadURL: r.DownloadURL, SHA256: r.SHA256,
			Directory: r.Directory, RunScript: r.RunScript, User: r.User,
		},
		PowerOffCommand: in.Spec.Agent.PowerOffCommand,
	}
	if in.Spec.Attestation.Method == bootstrapv1.AttestationTPM {
		// The token alone is refused for TPM configs: the agent also proves its TPM holds the key.
		cfg.Attestation = protocol.AttestationTPM
	}
	if in.SPIRE != nil {
		cfg.Attestation = protocol.AttestationSPIRE
		cfg.WorkloadAPIAddress = "unix://" + SPIREWorkloadAPISocket
		cfg.SPIREAgentConfigPath = SPIREAgentConfigPath
	}
	if !in.Credential.ExpiresAt.IsZero() {
		t := in.Credential.ExpiresAt.UTC()
		cfg.TokenExpiresAt = &t
	}
	if r.IdleTimeout != nil {
		cfg.Runner.IdleTimeout = protocol.Duration{Duration: r.IdleTimeout.Duration}
	}
	return cfg
}

// agentUnit runs the agent once per boot. It is not restarted: a second attestation with the same
// token is refused by design, and the agent powers the VM off whenever it gives up.
func agentUnit(bin string, spire bool) string {
	after := "network-online.target cloud-final.service"
	if spire {
		after += " spire-agent.service"
	}
	return fmt.Sprintf(`[Unit]
Description=HyperFleet runner agent
Wants=network-online.target
After=%s

[Service]
Type=simple
ExecStart=%s --config %s
Restart=no
# Credentials live in memory only.
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
`, after, bin, protocol.DefaultConfigPath)
}

func runCommands(a bootstrapv1.AgentSpec, bin string) []any {
	var cmds []any
	if a.DownloadURL != "" {
		tmp := bin + ".download"
		script := fmt.Sprintf("curl -fsSL --retry 5 -o %[1]s %[2]s && echo '%[3]s  %[1]s' | sha256sum -c - && install -m 0755 %[1]s %[4]s && rm -f %[1]s",
			shellQuote(tmp), shellQuote(a.DownloadURL), a.SHA256, shellQuote(bin))
		cmds = append(cmds, []any{"sh", "-c", script})
	}
	// --no-block: runcmd runs inside cloud-final.service, which both units are ordered after, so
	// waiting for their start would wait for runcmd itself, for ever.
	return append(cmds,
		[]any{"systemctl", "daemon-reload"},
		[]any{"systemctl", "enable", "--now", "--no-block", "hyperfleet-agent.service"})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Paths of spire-agent inside the VM. The image provides the binary; cloud-init writes the rest.
const (
	SPIREAgentBinaryPath = "/usr/local/bin/spire-agent"
	SPIREAgentConfigPath = "/etc/spire/agent/agent.conf"
	SPIREAgentBundlePath = "/etc/spire/agent/bundle.pem"
	SPIREAgentUnitPath   = "/etc/systemd/system/spire-agent.service"
	// SPIREWorkloadAPISocket is where spire-agent serves the SPIFFE Workload API.
	SPIREWorkloadAPISocket = "/run/spire/agent/public/api.sock"
	// SPIREAgentDataDir keeps the agent's SVID across its restarts.
	SPIREAgentDataDir = "/var/lib/spire/agent"
)

// SplitSPIREServerAddress checks that address is the host:port a VM's spire-agent can dial.
func SplitSPIREServerAddress(address string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(address)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("SPIRE server address %q for VMs must be host:port", address)
	}
	return host, port, nil
}

// spireAgentFiles are spire-agent's config (holding the join token, so root-only), the trust
// bundle it verifies the server with, and its unit.
func spireAgentFiles(in Input) ([]any, error) {
	host, port, err := SplitSPIREServerAddress(in.SPIRE.ServerAddress)
	if err != nil {
		return nil, err
	}
	if in.Credential.JoinToken == "" {
		return nil, errors.New("SPIRE attestation needs a join token")
	}
	if len(in.TrustBundlePEM) == 0 {
		return nil, errors.New("SPIRE attestation needs the server's trust bundle")
	}
	return []any{
		map[string]any{"path": SPIREAgentConfigPath, "permissions": "0600", "owner": "root:root",
			"content": SPIREAgentConfig(in.TrustDomain, host, port, in.Credential.JoinToken)},
		map[string]any{"path": SPIREAgentBundlePath, "permissions": "0644", "owner": "root:root", "content": string(in.TrustBundlePEM)},
		map[string]any{"path": SPIREAgentUnitPath, "permissions": "0644", "owner": "root:root", "content": spireAgentUnit},
	}, nil
}

// SPIREAgentConfig is the HCL configuration of a VM's spire-agent: join-token node attestation
// against host:port, and unix workload attestation for the Workload API.
func SPIREAgentConfig(trustDomain, host, port, joinToken string) string {
	return fmt.Sprintf(`agent {
  data_dir = %q
  log_level = "INFO"
  server_address = %q
  server_port = %q
  socket_path = %q
  trust_bundle_path = %q
  trust_domain = %q
  join_token = %q
}

plugins {
  NodeAttestor "join_token" {
    plugin_data {}
  }
  KeyManager "memory" {
    plugin_data {}
  }
  WorkloadAttestor "unix" {
    plugin_data {}
  }
}
`, SPIREAgentDataDir, host, port, SPIREWorkloadAPISocket, SPIREAgentBundlePath, trustDomain, joinToken)
}

// spireAgentUnit starts spire-agent once: its join token is spent on the first attempt, so a
// restart could not attest again.
var spireAgentUnit = fmt.Sprintf(`[Unit]
Description=SPIRE agent (HyperFleet join-token attestation)
Wants=network-online.target
After=network-online.target cloud-final.service

[Service]
Type=simple
ExecStartPre=/bin/mkdir -p %s %s
ExecStart=%s run -config %s
Restart=no

[Install]
WantedBy=multi-user.target
`, SPIREAgentDataDir, "/run/spire/agent/public", SPIREAgentBinaryPath, SPIREAgentConfigPath)
