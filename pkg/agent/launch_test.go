package agent

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

func setupFor(t *testing.T, platform string) protocol.RunnerSetup {
	t.Helper()
	cfg, err := protocol.ParseAgentConfig([]byte("serviceURL: https://bootstrap\ntrustDomain: td\ncaBundle: x\nrunner:\n  platform: " + platform + "\n  idleTimeout: 10m\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Runner
}

// TestGitHubLaunchIsUnchanged: the GitHub runner starts exactly as before other platforms:
// run.sh --jitconfig <config> in /opt/actions-runner, the worker log marking a job, and a config
// from a service that only sends jitConfig still works.
func TestGitHubLaunchIsUnchanged(t *testing.T) {
	g := NewWithT(t)
	r := setupFor(t, "")
	g.Expect(r.Platform).To(Equal("github"))
	g.Expect(r.JobStartedGlob).To(Equal("_diag/Worker_*.log"))
	l, err := runnerLaunch(r, protocol.RunnerConfig{Platform: "github", RunnerName: "hf-1", Config: "ZW5jb2RlZA=="})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Args).To(Equal([]string{"/opt/actions-runner/run.sh", "--jitconfig", "ZW5jb2RlZA=="}))
	g.Expect(l.Env).To(BeEmpty())

	old, err := runnerLaunch(r, protocol.RunnerConfig{Platform: "github", JITConfig: "ZW5jb2RlZA=="})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(old.Args).To(Equal(l.Args))
}

// TestGitLabLaunchRunsOneJob: gitlab-runner run-single for one job with the shell executor,
// giving up after the idle timeout; the glrt- token is in the environment only, never on the
// command line other processes can read.
func TestGitLabLaunchRunsOneJob(t *testing.T) {
	g := NewWithT(t)
	r := setupFor(t, "gitlab")
	g.Expect(r.Directory).To(Equal("/opt/gitlab-runner"))
	g.Expect(r.JobStartedGlob).To(Equal("builds/*"))
	l, err := runnerLaunch(r, protocol.RunnerConfig{Platform: "gitlab", RunnerName: "hf-1",
		Config: `{"url":"https://gitlab.example.com","token":"glrt-secret"}`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Args).To(Equal([]string{"/opt/gitlab-runner/gitlab-runner", "run-single", "--executor", "shell",
		"--max-builds", "1", "--wait-timeout", "600", "--builds-dir", "/opt/gitlab-runner/builds"}))
	g.Expect(l.Env).To(ConsistOf("CI_SERVER_URL=https://gitlab.example.com", "CI_SERVER_TOKEN=glrt-secret"))
	g.Expect(strings.Join(l.Args, " ")).NotTo(ContainSubstring("glrt-secret"))

	g.Expect(l.Files).To(BeEmpty())

	_, err = runnerLaunch(r, protocol.RunnerConfig{Platform: "gitlab", Config: `{"url":"https://gitlab.example.com"}`})
	g.Expect(err).To(HaveOccurred(), "a config without a token runs nothing")

	// A private CA: written beside the runner and named by CI_SERVER_TLS_CA_FILE.
	l, err = runnerLaunch(r, protocol.RunnerConfig{Platform: "gitlab",
		Config: `{"url":"https://gitlab.lab","token":"glrt-x","ca":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Files).To(HaveKeyWithValue("/opt/gitlab-runner/gitlab-ca.pem", ContainSubstring("BEGIN CERTIFICATE")))
	g.Expect(l.Env).To(ContainElement("CI_SERVER_TLS_CA_FILE=/opt/gitlab-runner/gitlab-ca.pem"))
}

// TestBuildkiteLaunchRunsOneJob: buildkite-agent start disconnects after one job (or after the
// idle timeout) with the per-VM token in the environment only.
func TestBuildkiteLaunchRunsOneJob(t *testing.T) {
	g := NewWithT(t)
	r := setupFor(t, "buildkite")
	r.IdleTimeout.Duration = 90 * time.Second
	l, err := runnerLaunch(r, protocol.RunnerConfig{Platform: "buildkite", RunnerName: "hf-2",
		Config: `{"endpoint":"https://agent.buildkite.com/v3","token":"bkct_secret","tags":["queue=default","os=linux"]}`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Args).To(Equal([]string{"/opt/buildkite-agent/buildkite-agent", "start", "--disconnect-after-job",
		"--disconnect-after-idle-timeout", "90", "--name", "hf-2", "--build-path", "/opt/buildkite-agent/builds",
		"--tags", "queue=default,os=linux"}))
	g.Expect(l.Env).To(ConsistOf("BUILDKITE_AGENT_TOKEN=bkct_secret", "BUILDKITE_AGENT_ENDPOINT=https://agent.buildkite.com/v3"))
	g.Expect(strings.Join(l.Args, " ")).NotTo(ContainSubstring("bkct_secret"))

	l, err = runnerLaunch(r, protocol.RunnerConfig{Platform: "buildkite", RunnerName: "hf-2",
		Config: `{"endpoint":"https://agent.lab/v3","token":"t","ca":"PEM"}`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Files).To(HaveKeyWithValue("/opt/buildkite-agent/buildkite-ca.pem", []byte("PEM")))
	g.Expect(l.Env).To(ContainElement("SSL_CERT_FILE=/opt/buildkite-agent/buildkite-ca.pem"))
	g.Expect(l.Args).NotTo(ContainElement("--tags"), "no tags, no flag")
}

// TestLaunchRefusesAnotherPlatformsConfig: a VM built for one platform runs nothing with a config
// of another (a mixed-up pool or a forged answer), and an empty config runs nothing either.
func TestLaunchRefusesAnotherPlatformsConfig(t *testing.T) {
	g := NewWithT(t)
	_, err := runnerLaunch(setupFor(t, "github"), protocol.RunnerConfig{Platform: "gitlab", Config: `{"url":"u","token":"t"}`})
	g.Expect(err).To(MatchError(ErrPlatformMismatch))
	_, err = runnerLaunch(setupFor(t, "buildkite"), protocol.RunnerConfig{Platform: "github", Config: "jit"})
	g.Expect(err).To(MatchError(ErrPlatformMismatch))
	_, err = runnerLaunch(setupFor(t, "github"), protocol.RunnerConfig{Platform: "github"})
	g.Expect(err).To(HaveOccurred())
	_, err = protocol.ParseAgentConfig([]byte("serviceURL: s\ntrustDomain: td\ncaBundle: x\nrunner:\n  platform: jenkins\n"))
	g.Expect(err).To(MatchError(ContainSubstring(`runner.platform "jenkins"`)))
}

// TestCheckGuest: a runner's os and arch, when set, must be the guest's; x64 is Go's amd64.
func TestCheckGuest(t *testing.T) {
	g := NewWithT(t)
	g.Expect(checkGuest(protocol.RunnerSetup{}, "linux", "arm64")).To(Succeed())
	g.Expect(checkGuest(protocol.RunnerSetup{OS: "linux", Arch: "x64"}, "linux", "amd64")).To(Succeed())
	g.Expect(checkGuest(protocol.RunnerSetup{Arch: "arm64"}, "linux", "arm64")).To(Succeed())
	err := checkGuest(protocol.RunnerSetup{Arch: "x64"}, "linux", "arm64")
	g.Expect(err).To(MatchError(ErrWrongGuest))
	g.Expect(err.Error()).To(ContainSubstring("runner.arch is x64, this guest is arm64"))
	g.Expect(checkGuest(protocol.RunnerSetup{Arch: "arm64"}, "linux", "amd64")).To(MatchError(ErrWrongGuest))
	g.Expect(checkGuest(protocol.RunnerSetup{OS: "linux"}, "windows", "amd64")).To(MatchError(ErrWrongGuest))
}
