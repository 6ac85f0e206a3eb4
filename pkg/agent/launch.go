package agent

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	platformlaunch "github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
)

// launch is how the agent starts one platform's runner for exactly one job: the command its
// platform's launch package (pkg/platform/<kind>/launch, linked by pkg/platform/all/launches)
// builds.
type launch = platformlaunch.Command

// ErrPlatformMismatch: the bootstrap service handed out a runner config of another platform than
// the VM's configuration names; the agent runs nothing.
var ErrPlatformMismatch = errors.New("runner config is for another CI platform")

// runnerLaunch builds the command that runs r's runner for one job with the one-time config the
// bootstrap service handed out for platform, through the platform's registered launch (each
// platform's package documents its command line).
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
	build, ok := platformlaunch.For(platform)
	if !ok {
		return launch{}, fmt.Errorf("unknown CI platform %q (this agent runs %v)", platform, platformlaunch.Kinds())
	}
	return build(secret, platformlaunch.Setup{Directory: r.Directory, Program: filepath.Join(r.Directory, r.RunScript),
		IdleTimeout: r.IdleTimeout.Duration, RunnerName: rc.RunnerName})
}
