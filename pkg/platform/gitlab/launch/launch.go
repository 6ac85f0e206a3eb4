// Package launch starts gitlab-runner for one job in the guest. It is linked into the agent and
// links nothing of GitLab's API client.
package launch

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
)

func init() { launch.Register("gitlab", Command) }

// CAFile is where the agent writes a pool's CA bundle, relative to the runner directory:
// gitlab-runner trusts it through CI_SERVER_TLS_CA_FILE.
const CAFile = "gitlab-ca.pem"

// config is GitLab's one-time runner config (platform.Registration.Config).
type config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// CA is the pool's CA bundle for a private instance, if it names one.
	CA string `json:"ca"`
}

// Command is <dir>/gitlab-runner run-single --executor shell --max-builds 1 --wait-timeout <idle
// seconds> --builds-dir <dir>/builds, with CI_SERVER_URL and CI_SERVER_TOKEN (glrt-) in the
// environment, and CI_SERVER_TLS_CA_FILE when the config carries a CA bundle.
func Command(secret string, s launch.Setup) (launch.Command, error) {
	var c config
	if err := json.Unmarshal([]byte(secret), &c); err != nil || c.URL == "" || c.Token == "" {
		return launch.Command{}, errors.New("GitLab runner config is not {\"url\", \"token\"}")
	}
	idle := strconv.Itoa(int(s.IdleTimeout.Seconds()))
	l := launch.Command{
		Args: []string{s.Program, "run-single", "--executor", "shell", "--max-builds", "1", "--wait-timeout", idle,
			"--builds-dir", filepath.Join(s.Directory, "builds")},
		Env: []string{"CI_SERVER_URL=" + c.URL, "CI_SERVER_TOKEN=" + c.Token},
	}
	if c.CA != "" {
		ca := filepath.Join(s.Directory, CAFile)
		l.Files = map[string][]byte{ca: []byte(c.CA)}
		l.Env = append(l.Env, "CI_SERVER_TLS_CA_FILE="+ca)
	}
	return l, nil
}
