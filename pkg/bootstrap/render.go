package bootstrap

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// Paths inside the VM.
const (
	DefaultAgentBinaryPath = "/usr/local/bin/hyperfleet-agent"
	AgentUnitPath          = "/etc/systemd/system/hyperfleet-agent.service"
	// DefaultJoinTokenTTL bounds how long a VM may take from rendering to attestation.
	DefaultJoinTokenTTL = 15 * time.Minute
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
	doc := map[string]any{
		"write_files": []any{
			map[string]any{"path": agent.DefaultConfigPath, "permissions": "0600", "owner": "root:root",
				"encoding": "b64", "content": base64.StdEncoding.EncodeToString(agentYAML)},
			map[string]any{"path": AgentUnitPath, "permissions": "0644", "owner": "root:root", "content": agentUnit(bin)},
		},
		"runcmd": runCommands(in.Spec.Agent, bin),
	}
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
func AgentConfig(in Input) *agent.Config {
	r := in.Spec.Runner
	cfg := &agent.Config{
		ServiceURL:  in.ServiceURL,
		TrustDomain: in.TrustDomain,
		CABundle:    string(in.TrustBundlePEM),
		JoinToken:   in.Credential.JoinToken,
		Namespace:   in.Namespace,
		Machine:     in.Machine,
		Runner: agent.RunnerConfig{
			Platform: in.Platform, Labels: in.Labels, OS: r.OS, Arch: r.Arch,
			DownloadURL: r.DownloadURL, SHA256: r.SHA256,
			Directory: r.Directory, ConfigScript: r.ConfigScript, RunScript: r.RunScript, User: r.User,
		},
		PowerOffCommand: in.Spec.Agent.PowerOffCommand,
	}
	if !in.Credential.ExpiresAt.IsZero() {
		t := in.Credential.ExpiresAt.UTC()
		cfg.TokenExpiresAt = &t
	}
	if r.IdleTimeout != nil {
		cfg.Runner.IdleTimeout = agent.Duration{Duration: r.IdleTimeout.Duration}
	}
	return cfg
}

// agentUnit runs the agent once per boot. It is not restarted: a second attestation with the same
// token is refused by design, and the agent powers the VM off whenever it gives up.
func agentUnit(bin string) string {
	return fmt.Sprintf(`[Unit]
Description=HyperFleet runner agent
Wants=network-online.target
After=network-online.target cloud-final.service

[Service]
Type=simple
ExecStart=%s --config %s
Restart=no
# Credentials live in memory only.
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
`, bin, agent.DefaultConfigPath)
}

func runCommands(a bootstrapv1.AgentSpec, bin string) []any {
	var cmds []any
	if a.DownloadURL != "" {
		tmp := bin + ".download"
		script := fmt.Sprintf("curl -fsSL --retry 5 -o %[1]s %[2]s && echo '%[3]s  %[1]s' | sha256sum -c - && install -m 0755 %[1]s %[4]s && rm -f %[1]s",
			shellQuote(tmp), shellQuote(a.DownloadURL), a.SHA256, shellQuote(bin))
		cmds = append(cmds, []any{"sh", "-c", script})
	}
	return append(cmds,
		[]any{"systemctl", "daemon-reload"},
		[]any{"systemctl", "enable", "--now", "hyperfleet-agent.service"})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
