// Package launch starts buildkite-agent for one job in the guest. It is linked into the agent and
// links nothing of Buildkite's API client.
package launch

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
)

func init() { launch.Register("buildkite", Command) }

// CAFile is where the agent writes a pool's CA bundle, relative to the runner directory:
// buildkite-agent trusts it through SSL_CERT_FILE, as every Go program does (the system's
// certificate directories are still read beside it).
const CAFile = "buildkite-ca.pem"

// config is Buildkite's one-time agent config (platform.Registration.Config).
type config struct {
	Endpoint string   `json:"endpoint"`
	Token    string   `json:"token"`
	Tags     []string `json:"tags"`
	// CA is the pool's CA bundle for a private agent endpoint, if it names one.
	CA string `json:"ca"`
}

// Command is <dir>/buildkite-agent start --disconnect-after-job --disconnect-after-idle-timeout
// <idle seconds> --name <runner> --tags <tags> --build-path <dir>/builds, with
// BUILDKITE_AGENT_TOKEN and BUILDKITE_AGENT_ENDPOINT in the environment, and SSL_CERT_FILE when
// the config carries a CA bundle.
func Command(secret string, s launch.Setup) (launch.Command, error) {
	var c config
	if err := json.Unmarshal([]byte(secret), &c); err != nil || c.Endpoint == "" || c.Token == "" {
		return launch.Command{}, errors.New("Buildkite agent config is not {\"endpoint\", \"token\", \"tags\"}")
	}
	args := []string{s.Program, "start", "--disconnect-after-job", "--disconnect-after-idle-timeout", strconv.Itoa(int(s.IdleTimeout.Seconds())),
		"--name", s.RunnerName, "--build-path", filepath.Join(s.Directory, "builds")}
	if len(c.Tags) > 0 {
		args = append(args, "--tags", strings.Join(c.Tags, ","))
	}
	l := launch.Command{Args: args, Env: []string{"BUILDKITE_AGENT_TOKEN=" + c.Token, "BUILDKITE_AGENT_ENDPOINT=" + c.Endpoint}}
	if c.CA != "" {
		ca := filepath.Join(s.Directory, CAFile)
		l.Files = map[string][]byte{ca: []byte(c.CA)}
		l.Env = append(l.Env, "SSL_CERT_FILE="+ca)
	}
	return l, nil
}
