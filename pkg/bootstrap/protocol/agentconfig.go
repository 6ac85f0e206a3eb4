package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultConfigPath is where cloud-init writes the agent's configuration.
const DefaultConfigPath = "/etc/hyperfleet/agent.yaml"

// Defaults for what a configuration leaves unset.
const (
	DefaultRunnerDir      = "/opt/actions-runner"
	DefaultRunScript      = "run.sh"
	DefaultIdleTimeout    = 15 * time.Minute
	DefaultJobStartedGlob = "_diag/Worker_*.log"
)

// CI platforms the agent runs a runner of (RunnerSetup.Platform, RunnerConfig.Platform).
const (
	PlatformGitHub    = "github"
	PlatformGitLab    = "gitlab"
	PlatformBuildkite = "buildkite"
)

// RunnerDefaults are a platform's runner directory, the program the agent starts and the file
// that appears when a job starts, for a configuration that leaves them unset.
type RunnerDefaults struct {
	Directory, RunScript, JobStartedGlob string
}

// PlatformDefaults are the runner defaults of each platform: GitHub's actions-runner (run.sh
// --jitconfig; the worker log of a job), gitlab-runner (run-single; a job's checkout under the
// builds directory) and buildkite-agent (start --disconnect-after-job; a job's checkout under the
// build path).
var PlatformDefaults = map[string]RunnerDefaults{
	PlatformGitHub:    {Directory: DefaultRunnerDir, RunScript: DefaultRunScript, JobStartedGlob: DefaultJobStartedGlob},
	PlatformGitLab:    {Directory: "/opt/gitlab-runner", RunScript: "gitlab-runner", JobStartedGlob: "builds/*"},
	PlatformBuildkite: {Directory: "/opt/buildkite-agent", RunScript: "buildkite-agent", JobStartedGlob: "builds/*"},
}

// Attestation methods (AgentConfig.Attestation).
const (
	// AttestationJoinToken (the default) redeems the join token with the bootstrap service.
	AttestationJoinToken = "JoinToken"
	// AttestationTPM adds TPM proof to the join token.
	AttestationTPM = "TPM"
	// AttestationSPIRE: the VM's spire-agent attests to a SPIRE server with the join token and the
	// HyperFleet agent takes its SVID from spire-agent's Workload API.
	AttestationSPIRE = "SPIRE"
)

// DefaultWorkloadAPIAddress is where a VM's spire-agent serves the SPIFFE Workload API.
const DefaultWorkloadAPIAddress = "unix:///run/spire/agent/public/api.sock"

// DefaultPowerOffCommand ends the VM.
var DefaultPowerOffCommand = []string{"systemctl", "poweroff"}

// AgentConfig is the agent's configuration file (YAML), rendered into cloud-init by the BootstrapConfig
// controller. It holds the single-use join token and no long-lived secret.
type AgentConfig struct {
	// ServiceURL is the bootstrap service, https://host:port.
	ServiceURL string `json:"serviceURL"`
	// TrustDomain of the SPIFFE IDs; the service must present spiffe://<td>/hyperfleet/bootstrap-service.
	TrustDomain string `json:"trustDomain"`
	// CABundle is the PEM bundle of the trust domain.
	CABundle string `json:"caBundle"`
	// JoinToken is redeemed once for an X509-SVID.
	JoinToken string `json:"joinToken,omitempty"`
	// Attestation is the method: JoinToken (default); TPM, which adds TPM proof to the token; or
	// SPIRE, where the VM's spire-agent attests and the agent takes its SVID from the Workload API.
	Attestation string `json:"attestation,omitempty"`
	// WorkloadAPIAddress is spire-agent's Workload API for method SPIRE; DefaultWorkloadAPIAddress
	// when empty.
	WorkloadAPIAddress string `json:"workloadAPIAddress,omitempty"`
	// SPIREAgentConfigPath is spire-agent's configuration, whose spent join token the agent removes
	// once it holds its SVID (method SPIRE).
	SPIREAgentConfigPath string `json:"spireAgentConfigPath,omitempty"`
	// TPMDevice is the TPM for method TPM: a device path (default /dev/tpmrm0) or tcp://host:port.
	TPMDevice string `json:"tpmDevice,omitempty"`
	// TokenExpiresAt is when the join token stops working; the agent gives up then.
	TokenExpiresAt *time.Time `json:"tokenExpiresAt,omitempty"`
	// Namespace and Machine name the VM, for logs.
	Namespace string `json:"namespace,omitempty"`
	Machine   string `json:"machine,omitempty"`
	// Runner says how to install and run the CI runner.
	Runner RunnerSetup `json:"runner"`
	// PowerOffCommand ends the VM; DefaultPowerOffCommand when empty.
	PowerOffCommand []string `json:"powerOffCommand,omitempty"`
}

// RunnerSetup describes how the agent installs and runs the CI runner.
type RunnerSetup struct {
	// Platform is the CI platform: github (the default), gitlab or buildkite. It picks the
	// defaults below and the runner's command line; the bootstrap service's RunnerConfig must
	// name the same platform.
	Platform string `json:"platform,omitempty"`
	// Labels the runner registers with (informational: the one-time config carries them).
	Labels []string `json:"labels,omitempty"`
	// OS is linux; Arch (x64 or arm64), when set, must be the guest's: the agent checks it first.
	OS   string `json:"os,omitempty"`
	Arch string `json:"arch,omitempty"`
	// DownloadURL and SHA256 of the runner tarball; the download is skipped when RunScript exists.
	DownloadURL string `json:"downloadURL,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	// Directory the runner is unpacked into and runs from.
	Directory string `json:"directory,omitempty"`
	RunScript string `json:"runScript,omitempty"`
	// ConfigScript is read and ignored: services before v0.1 wrote it, and the configuration is
	// parsed strictly. No platform's one-job runner runs a configuration script.
	ConfigScript string `json:"configScript,omitempty"`
	// User runs the runner when the agent runs as root; empty means the agent's own user.
	User string `json:"user,omitempty"`
	// IdleTimeout powers the VM off when no job started within it.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// JobStartedGlob, relative to Directory, matches the file the runner creates when a job starts
	// (the real runner's per-job worker log).
	JobStartedGlob string `json:"jobStartedGlob,omitempty"`
}

// Duration is a time.Duration written as "15m" in YAML.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "15m" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		d.Duration = v
		return err
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like 15m: %w", err)
	}
	d.Duration = time.Duration(secs * float64(time.Second))
	return nil
}

// Marshal renders the configuration as YAML.
func (c *AgentConfig) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// ParseAgentConfig reads an agent configuration, fills in defaults and validates it.
func ParseAgentConfig(data []byte) (*AgentConfig, error) {
	c := &AgentConfig{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	c.defaults()
	return c, c.validate()
}

func (c *AgentConfig) defaults() {
	r := &c.Runner
	if r.Platform == "" {
		r.Platform = PlatformGitHub
	}
	d := PlatformDefaults[r.Platform]
	if r.Directory == "" {
		r.Directory = d.Directory
	}
	if r.RunScript == "" {
		r.RunScript = d.RunScript
	}
	if r.IdleTimeout.Duration == 0 {
		r.IdleTimeout.Duration = DefaultIdleTimeout
	}
	if r.JobStartedGlob == "" {
		r.JobStartedGlob = d.JobStartedGlob
	}
	if len(c.PowerOffCommand) == 0 {
		c.PowerOffCommand = DefaultPowerOffCommand
	}
	if c.Attestation == AttestationSPIRE && c.WorkloadAPIAddress == "" {
		c.WorkloadAPIAddress = DefaultWorkloadAPIAddress
	}
}

func (c *AgentConfig) validate() error {
	var errs []error
	if c.ServiceURL == "" {
		errs = append(errs, errors.New("serviceURL is required"))
	}
	if c.TrustDomain == "" {
		errs = append(errs, errors.New("trustDomain is required"))
	}
	if c.CABundle == "" {
		errs = append(errs, errors.New("caBundle is required"))
	}
	switch c.Attestation {
	case "", AttestationJoinToken, AttestationTPM, AttestationSPIRE:
	default:
		errs = append(errs, fmt.Errorf("attestation %q: want JoinToken, TPM or SPIRE", c.Attestation))
	}
	if _, ok := PlatformDefaults[c.Runner.Platform]; !ok {
		errs = append(errs, fmt.Errorf("runner.platform %q: want github, gitlab or buildkite", c.Runner.Platform))
	}
	if (c.Runner.DownloadURL == "") != (c.Runner.SHA256 == "") {
		errs = append(errs, errors.New("runner.downloadURL and runner.sha256 go together"))
	}
	return errors.Join(errs...)
}
