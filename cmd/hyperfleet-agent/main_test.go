package main_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var (
	env                     *testenv.Env
	agentBin, fakeRunnerBin string
	td                      = spiffeid.RequireTrustDomainFromString("hyperfleet.test")
)

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server and the bootstrap service")
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "hyperfleet-agent-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	agentBin, fakeRunnerBin = filepath.Join(dir, "hyperfleet-agent"), filepath.Join(dir, "fakerunner")
	for bin, pkg := range map[string]string{agentBin: ".", fakeRunnerBin: "../../test/fakerunner"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("building %s: %v: %s", pkg, err, out)
		}
	}
	if env, err = testenv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	return m.Run(), nil
}

// vm is one runner VM's world: a bootstrap service, a fake GitHub, its Machine and a scratch
// directory standing in for the VM's disk.
type vm struct {
	gh       *fakegithub.Server
	fleet    *bootstraptest.Fleet
	machine  *bootstraptest.Machine
	dir      string
	poweroff string
	config   string
}

func newVM(t *testing.T, runner bootstrapv1.RunnerSpec) *vm {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hyperfleet-system-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	caKey := types.NamespacedName{Namespace: ns.Name, Name: "bootstrap-ca"}
	ca, err := builtin.LoadOrCreateCA(ctx, env.Client, caKey, td)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := service.New(service.Options{Client: env.Client, CA: ca, Attestor: &builtin.Attestor{Client: env.Client, CA: ca},
		TPM: &tpm.Attestor{Client: env.Client, CA: ca}, Platforms: bootstraptest.Platforms(env.Client)})
	g.Expect(err).NotTo(HaveOccurred())
	url, err := srv.Start(ctx, "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())

	v := &vm{gh: fakegithub.StartForTest(t, fakegithub.Options{TLS: true}), dir: t.TempDir()}
	v.fleet = bootstraptest.NewFleet(t, env.Client, v.gh)
	v.machine = v.fleet.NewMachine(t, "runner-vm", builtin.NewProvisioner(env.Client, caKey, td), td, time.Minute)
	v.poweroff = filepath.Join(v.dir, "powered-off")
	runner.Directory = filepath.Join(v.dir, "actions-runner")
	spec := bootstrapv1.BootstrapConfigSpec{Runner: runner, Agent: bootstrapv1.AgentSpec{PowerOffCommand: []string{"touch", v.poweroff}}}
	cfg := bootstrap.AgentConfig(bootstrap.Input{
		Namespace: v.fleet.Namespace, Machine: "runner-vm", Spec: spec, ServiceURL: url, TrustDomain: td.Name(),
		TrustBundlePEM: ca.BundlePEM(), Platform: "github", Labels: v.fleet.Labels,
		Credential: identity.Credential{JoinToken: v.machine.Token, ExpiresAt: time.Now().Add(time.Minute)},
	})
	data, err := cfg.Marshal()
	g.Expect(err).NotTo(HaveOccurred())
	v.config = filepath.Join(v.dir, "agent.yaml")
	g.Expect(os.WriteFile(v.config, data, 0o600)).To(Succeed())
	return v
}

// boot runs the agent as the VM's systemd unit would, bounded by a minute.
func (v *vm) boot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentBin, append([]string{"--config", v.config, "--retry-interval", "200ms", "--retry-window", "5s", "--stop-grace", "5s"}, args...)...)
	cmd.WaitDelay = 10 * time.Second // a runner left behind must not hold the output open
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (v *vm) poweredOff() bool {
	_, err := os.Stat(v.poweroff)
	return err == nil
}

func TestAgentRunsOneJobAndPowersOff(t *testing.T) {
	g := NewWithT(t)
	tarball, sum := runnerTarball(t)
	pkg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tarball) }))
	t.Cleanup(pkg.Close)
	v := newVM(t, bootstrapv1.RunnerSpec{DownloadURL: pkg.URL + "/actions-runner.tar.gz", SHA256: sum,
		IdleTimeout: &metav1.Duration{Duration: 30 * time.Second}})
	job := v.gh.CreateJob(v.fleet.Repo, []string{"self-hosted", "linux"})

	out, err := v.boot(t)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(v.poweredOff()).To(BeTrue(), out)
	done, _ := v.gh.Job(job.ID)
	g.Expect(done.Status).To(Equal("completed"), out)
	g.Expect(done.RunnerName).To(Equal("runner-vm"))
	g.Expect(v.gh.VerifyEachJobRanOnce()).To(Succeed())
	g.Expect(v.gh.Runners()).To(BeEmpty(), "the ephemeral runner is gone after its job")

	cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
	g.Expect(conditions.IsTrue(cfg, bootstrapv1.AttestedCondition)).To(BeTrue())
	g.Expect(cfg.Status.AttestedTime).NotTo(BeNil())
	left, err := os.ReadFile(v.config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(left)).NotTo(ContainSubstring(v.machine.Token), "the spent join token is scrubbed from disk")
}

func TestAgentPowersOffWhenIdle(t *testing.T) {
	g := NewWithT(t)
	v := newVM(t, bootstrapv1.RunnerSpec{IdleTimeout: &metav1.Duration{Duration: 2 * time.Second}})
	installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))
	out, err := v.boot(t)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("IdleTimeout"))
	g.Expect(v.poweredOff()).To(BeTrue(), out)
	g.Expect(v.gh.Runners()).To(BeEmpty(), "the idle runner is deregistered")
}

func TestAgentPowersOffWhenCredentialsAreRefused(t *testing.T) {
	g := NewWithT(t)
	v := newVM(t, bootstrapv1.RunnerSpec{})
	installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))
	// Someone else redeemed the token first: the VM's own attempt is a replay.
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: v.fleet.Namespace, Name: "runner-vm"}, v.machine.Config)).To(Succeed())
	now := metav1.Now()
	v.machine.Config.Status.JoinToken.RedeemedTime = &now
	g.Expect(env.Client.Status().Update(context.Background(), v.machine.Config)).To(Succeed())

	out, err := v.boot(t)
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("CredentialsRefused"))
	g.Expect(v.poweredOff()).To(BeTrue(), out)
	g.Expect(v.gh.Runners()).To(BeEmpty())
}

// TestAgentOnTheWrongArchitecturePowersOff: a pool whose template is of another architecture than
// its BootstrapConfig's runner.arch fails at the first boot: the agent powers the VM off before it
// spends the join token, and no runner registers.
func TestAgentOnTheWrongArchitecturePowersOff(t *testing.T) {
	g := NewWithT(t)
	other := map[string]string{"amd64": "arm64", "arm64": "x64"}[runtime.GOARCH]
	if other == "" {
		t.Skipf("no runner.arch names an architecture other than %s", runtime.GOARCH)
	}
	v := newVM(t, bootstrapv1.RunnerSpec{Arch: other})
	installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))
	out, err := v.boot(t)
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("runner.arch is " + other))
	g.Expect(v.poweredOff()).To(BeTrue(), out)
	g.Expect(v.gh.Runners()).To(BeEmpty())
	cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
	g.Expect(cfg.Status.JoinToken).NotTo(BeNil())
	g.Expect(cfg.Status.JoinToken.RedeemedTime).To(BeNil(), "the join token is not spent")
}

func installFakeRunner(t *testing.T, dir string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	data, err := os.ReadFile(fakeRunnerBin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "run.sh"), data, 0o755)).To(Succeed())
}

// runnerTarball packs the fake runner as run.sh, like the real runner package, with its sha256.
func runnerTarball(t *testing.T) ([]byte, string) {
	t.Helper()
	data, err := os.ReadFile(fakeRunnerBin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))})
	_, _ = tw.Write(data)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:])
}
