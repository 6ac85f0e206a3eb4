package devfleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// StateFileName is the state file's name inside the state directory.
const StateFileName = "state.json"

// StateVersion is bumped whenever State changes incompatibly.
const StateVersion = 1

// State is what a running fleet tells other processes (hyperfleet-dev jobs and status, scripts,
// people) about itself. It is written as JSON to <state dir>/state.json once everything runs and
// removed on a clean stop.
type State struct {
	Version   int       `json:"version"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
	// Namespace, Cluster and Pool name the sample fleet's objects.
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Pool      string `json:"pool"`
	// Platform is the sample pool's CI platform: github, gitlab or buildkite; a mixed fleet's
	// platforms, comma-separated.
	Platform string `json:"platform,omitempty"`
	// Pools are a mixed fleet's pools, one per platform (Pool is the first's name).
	Pools []PoolState `json:"pools,omitempty"`
	// Kubeconfig is an admin kubeconfig of the local API server; Kubectl a matching kubectl.
	Kubeconfig string `json:"kubeconfig"`
	Kubectl    string `json:"kubectl,omitempty"`
	APIServer  string `json:"apiServer"`
	// LogDir holds every component's log and one log per VM boot.
	LogDir string `json:"logDir"`
	// HistoryURL is the job history store the manager and the console share.
	HistoryURL string `json:"historyURL,omitempty"`

	Webhook WebhookState `json:"webhook"`
	Proxmox ProxmoxState `json:"proxmox"`
	// HyperV is set when the fleet runs the Hyper-V simulator.
	HyperV *HyperVState `json:"hyperv,omitempty"`
	// VSphere is set when the fleet runs the vCenter simulator.
	VSphere *VSphereState `json:"vsphere,omitempty"`
	GitHub  GitHubState   `json:"github"`
	// GitLab is set when the sample pool is a GitLab pool.
	GitLab *GitLabState `json:"gitlab,omitempty"`
	// Buildkite is set when the sample pool is a Buildkite pool.
	Buildkite *BuildkiteState `json:"buildkite,omitempty"`
	Bootstrap BootstrapState  `json:"bootstrapService"`
	// SPIRE is set when VMs are attested by SPIRE.
	SPIRE   *SPIREState  `json:"spire,omitempty"`
	Manager ManagerState `json:"manager"`
	Runner  RunnerState  `json:"runnerPackage"`
	// Console is the operator console (unless Options.NoConsole).
	Console *ConsoleState `json:"console,omitempty"`
}

// WebhookState is where GitHub webhooks are received and the secret that signs them.
type WebhookState struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// ProxmoxState is the Proxmox VE simulator.
type ProxmoxState struct {
	// URL is the API base, https://127.0.0.1:PORT/api2/json.
	URL string `json:"url"`
	// TokenID and TokenSecret form "Authorization: PVEAPIToken=TokenID=TokenSecret".
	TokenID     string `json:"tokenID"`
	TokenSecret string `json:"tokenSecret"`
	// AdminURL is the simulator's unauthenticated admin endpoint (GET vms, faults, ...).
	AdminURL string `json:"adminURL"`
	// CAFile is the certificate to trust (curl --cacert).
	CAFile string `json:"caFile"`
}

// GitHubState is the fake GitHub API.
type GitHubState struct {
	URL            string `json:"url"`
	AppID          int64  `json:"appID"`
	InstallationID int64  `json:"installationID"`
	Organization   string `json:"organization"`
	Repository     string `json:"repository"`
	// JobsURL lists jobs (GET) and creates one (POST {"repository","labels","name"}).
	JobsURL string `json:"jobsURL"`
	// RunnersURL lists registered runners.
	RunnersURL string `json:"runnersURL"`
	// CAFile is the certificate the fake GitHub's HTTPS is signed with (curl --cacert); the
	// fleet's RunnerPool trusts it through spec.platform.github.caBundleRef.
	CAFile string `json:"caFile"`
}

// BootstrapState is the bootstrap service VMs attest to.
type BootstrapState struct {
	URL string `json:"url"`
	// SPIREURL is the endpoint for VMs attested by SPIRE (Identity SPIRE only).
	SPIREURL string `json:"spireURL,omitempty"`
}

// ManagerState is HyperFleet's manager's endpoints.
type ManagerState struct {
	MetricsURL string `json:"metricsURL"`
	HealthURL  string `json:"healthURL"`
}

// RunnerState is the runner package the agents download.
type RunnerState struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// DefaultStateDir is the state directory under a repository checkout.
func DefaultStateDir(repoRoot string) string { return filepath.Join(repoRoot, ".hyperfleet", "dev") }

// WriteState writes s to dir/state.json atomically.
func WriteState(dir string, s *State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFileName+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, StateFileName))
}

// ErrNotRunning means no fleet's state file exists, or its process is gone.
var ErrNotRunning = errors.New("no local fleet is running (start one with `make dev`)")

// ReadState reads dir/state.json and checks that the fleet that wrote it still runs.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	s := &State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFileName), err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("%s has version %d, this program reads %d", filepath.Join(dir, StateFileName), s.Version, StateVersion)
	}
	if !processAlive(s.PID) {
		return s, fmt.Errorf("%w: process %d that wrote %s is gone", ErrNotRunning, s.PID, filepath.Join(dir, StateFileName))
	}
	return s, nil
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
