// Package protocol is the wire contract between hyperfleet-agent and HyperFleet's server side: the
// agent's configuration that the BootstrapConfig controller renders, the bootstrap service's
// requests and answers, and the TPM evidence. Server-side packages import it, never pkg/agent, so
// neither the manager nor the bootstrap service links the agent or TPM device code.
package protocol

import "time"

// Endpoints of the bootstrap service.
const (
	// AttestPath: POST AttestRequest over TLS (no client certificate) → AttestResponse.
	AttestPath = "/v1/attest"
	// RunnerConfigPath: GET over mTLS with the machine's SVID → RunnerConfig, once per VM.
	RunnerConfigPath = "/v1/runner-config"
	// RunnerPath: DELETE over mTLS deregisters the VM's runner when it never took a job.
	RunnerPath = "/v1/runner"
)

// AttestRequest exchanges a join token and a CSR for an X509-SVID.
type AttestRequest struct {
	JoinToken string `json:"joinToken"`
	// CSR is a PEM certificate signing request for the key the VM generated and keeps.
	CSR string `json:"csr"`
}

// AttestResponse carries the issued SVID.
type AttestResponse struct {
	SPIFFEID string `json:"spiffeID"`
	// SVID is the PEM certificate chain, leaf first.
	SVID      string    `json:"svid"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// RunnerConfig is the VM's one-time runner configuration.
type RunnerConfig struct {
	// Platform is the pool's CI platform (github, gitlab, buildkite): the agent runs that
	// platform's runner.
	Platform   string `json:"platform"`
	RunnerName string `json:"runnerName"`
	// Config is the platform's one-time runner config (platform.Registration.Config): GitHub's
	// encoded JIT config for run.sh --jitconfig; GitLab's JSON {"url", "token"}; Buildkite's JSON
	// {"endpoint", "token", "tags"}.
	Config string `json:"config"`
	// JITConfig repeats Config for GitHub runners, for agents that predate Config.
	// Deprecated: read Config.
	JITConfig string `json:"jitConfig,omitempty"`
}

// Secret returns the one-time config, from Config or, from an older service, JITConfig.
func (rc RunnerConfig) Secret() string {
	if rc.Config != "" {
		return rc.Config
	}
	return rc.JITConfig
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}
