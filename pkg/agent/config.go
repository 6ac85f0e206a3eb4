package agent

import (
	"os"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

// The agent's configuration is part of the wire contract with the bootstrap service and the
// BootstrapConfig controller, which live in pkg/bootstrap/protocol; these names keep the agent's
// code short.
type (
	// Config is protocol.AgentConfig.
	Config = protocol.AgentConfig
	// RunnerConfig is protocol.RunnerSetup.
	RunnerConfig = protocol.RunnerSetup
	// Duration is protocol.Duration.
	Duration = protocol.Duration
)

// Constants of the configuration (see protocol).
const (
	DefaultConfigPath         = protocol.DefaultConfigPath
	DefaultRunnerDir          = protocol.DefaultRunnerDir
	DefaultRunScript          = protocol.DefaultRunScript
	DefaultIdleTimeout        = protocol.DefaultIdleTimeout
	DefaultJobStartedGlob     = protocol.DefaultJobStartedGlob
	AttestationJoinToken      = protocol.AttestationJoinToken
	AttestationTPM            = protocol.AttestationTPM
	AttestationSPIRE          = protocol.AttestationSPIRE
	DefaultWorkloadAPIAddress = protocol.DefaultWorkloadAPIAddress
)

// ParseConfig reads a configuration and fills in defaults.
func ParseConfig(data []byte) (*Config, error) { return protocol.ParseAgentConfig(data) }

// LoadConfig reads the configuration file at path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(data)
}
