package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

// launch is how the agent starts one platform's runner for exactly one job.
type launch struct {
	// Args is the command line, program first.
	Args []string
	// Env is added to the agent's environment: the one-time secret travels here rather than on
	// the command line where a platform's runner reads it from the environment.
	Env []string
	// Files are written (mode 0644) before the runner starts: the CA bundle a platform's API is
	// verified with, when the registration carries one.
	Files map[string][]byte
}

// gitlabCAFile and buildkiteCAFile are where the agent writes a pool's CA bundle, relative to the
// runner directory: gitlab-runner trusts it through CI_SERVER_TLS_CA_FILE, buildkite-agent through
// SSL_CERT_FILE, as every Go program does (the system's certificate directories are still read
// beside it).
const (
	gitlabCAFile    = "gitlab-ca.pem"
	buildkiteCAFile = "buildkite-ca.pem"
)

// gitlabConfig is GitLab's one-time runner config (platform.Registration.Config).
type gitlabConfig struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// CA is the pool's CA bundle for a private instance, if it names one.
	CA string `json:"ca"`
}

// buildkiteConfig is Buildkite's one-time agent config (platform.Registration.Config).
type buildkiteConfig struct {
	Endpoint string   `json:"endpoint"`
	Token    string   `json:"token"`
	Tags     []string `json:"tags"`
	// CA is the pool's CA bundle for a private agent endpoint, if it names one.
	CA string `json:"ca"`
}

// ErrPlatformMismatch: the bootstrap service handed out a runner config of another platform than
// the VM's configuration names; the agent runs nothing.
var ErrPlatformMismatch = errors.New("runner config is for another CI platform")

// runnerLaunch builds the command that runs r's runner for one job with the one-time config the
// bootstrap service handed out for platform:
//
//   - github: <dir>/run.sh --jitconfig <encoded JIT config>, exactly as before other platforms;
//   - gitlab: <dir>/gitlab-runner run-single --executor shell --max-builds 1 --wait-timeout <idle
//     seconds> --builds-dir <dir>/builds, with CI_SERVER_URL and CI_SERVER_TOKEN (glrt-) in the
//     environment, and CI_SERVER_TLS_CA_FILE when the config carries a CA bundle;
//   - buildkite: <dir>/buildkite-agent start --disconnect-after-job --disconnect-after-idle-timeout
//     <idle seconds> --name <runner> --tags <tags> --build-path <dir>/builds, with
//     BUILDKITE_AGENT_TOKEN and BUILDKITE_AGENT_ENDPOINT in the environment, and SSL_CERT_FILE
//     when the config carries a CA bundle.
//
// ErrWrongGuest: the runner's BootstrapConfig names an OS or architecture the guest is not of.
var ErrWrongGuest = errors.New("the guest is not of the runner's os or arch")

// goarch names each runner.arch as Go names architectures.
var goarch = map[string]string{"x64": "amd64", "arm64": "arm64"}

// checkGuest checks the runner's os and arch (empty: any) against the guest's, as Go names them.
func checkGuest(r protocol.RunnerSetup, goos, arch string) error {
	if r.OS != "" && r.OS != goos {
		return fmt.Errorf("%w: runner.os is %s, this guest runs %s", ErrWrongGuest, r.OS, goos)
	}
	if r.Arch != "" && goarch[r.Arch] != arch {
		return fmt.Errorf("%w: runner.arch is %s, this guest is %s: the pool's template does not match its BootstrapConfig", ErrWrongGuest, r.Arch, arch)
	}
	return nil
}

func runnerLaunch(r protocol.RunnerSetup, rc protocol.RunnerConfig) (launch, error) {
	platform := rc.Platform
	if platform == "" {
		platform = protocol.PlatformGitHub // a service that predates RunnerConfig.Platform
	}
	want := r.Platform
	if want == "" {
		want = protocol.PlatformGitHub
	}
	if platform != want {
		return launch{}, fmt.Errorf("%w: the VM runs %s, the service sent %s", ErrPlatformMismatch, want, platform)
	}
	secret := rc.Secret()
	if secret == "" {
		return launch{}, errors.New("runner config holds no one-time config")
	}
	program := filepath.Join(r.Directory, r.RunScript)
	idle := strconv.Itoa(int(r.IdleTimeout.Seconds()))
	builds := filepath.Join(r.Directory, "builds")
	switch platform {
	case protocol.PlatformGitHub:
		return launch{Args: []string{program, "--jitconfig", secret}}, nil
	case protocol.PlatformGitLab:
		var c gitlabConfig
		if err := json.Unmarshal([]byte(secret), &c); err != nil || c.URL == "" || c.Token == "" {
			return launch{}, errors.New("GitLab runner config is not {\"url\", \"token\"}")
		}
		l := launch{
			Args: []string{program, "run-single", "--executor", "shell", "--max-builds", "1", "--wait-timeout", idle, "--builds-dir", builds},
			Env:  []string{"CI_SERVER_URL=" + c.URL, "CI_SERVER_TOKEN=" + c.Token},
		}
		if c.CA != "" {
			ca := filepath.Join(r.Directory, gitlabCAFile)
			l.Files = map[string][]byte{ca: []byte(c.CA)}
			l.Env = append(l.Env, "CI_SERVER_TLS_CA_FILE="+ca)
		}
		return l, nil
	case protocol.PlatformBuildkite:
		var c buildkiteConfig
		if err := json.Unmarshal([]byte(secret), &c); err != nil || c.Endpoint == "" || c.Token == "" {
			return launch{}, errors.New("Buildkite agent config is not {\"endpoint\", \"token\", \"tags\"}")
		}
		args := []string{program, "start", "--disconnect-after-job", "--disconnect-after-idle-timeout", idle,
			"--name", rc.RunnerName, "--build-path", builds}
		if len(c.Tags) > 0 {
			args = append(args, "--tags", strings.Join(c.Tags, ","))
		}
		l := launch{Args: args, Env: []string{"BUILDKITE_AGENT_TOKEN=" + c.Token, "BUILDKITE_AGENT_ENDPOINT=" + c.Endpoint}}
		if c.CA != "" {
			ca := filepath.Join(r.Directory, buildkiteCAFile)
			l.Files = map[string][]byte{ca: []byte(c.CA)}
			l.Env = append(l.Env, "SSL_CERT_FILE="+ca)
		}
		return l, nil
	}
	return launch{}, fmt.Errorf("unknown CI platform %q", platform)
}
