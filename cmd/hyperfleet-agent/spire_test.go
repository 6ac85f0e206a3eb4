package main_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire/spiretest"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// spireWorld is a real SPIRE server, the bootstrap service holding the SVID a spire-agent of its
// own gives it (as on a Kubernetes node), a fake GitHub and a RunnerPool.
type spireWorld struct {
	server      *spiretest.Server
	spireAgent  string
	provisioner *spire.Provisioner
	serviceURL  string
	serviceAPI  string
	gh          *fakegithub.Server
	fleet       *bootstraptest.Fleet
	bundle      []byte
}

func newSPIREWorld(t *testing.T) *spireWorld {
	t.Helper()
	g := NewWithT(t)
	serverBin, agentBin := spiretest.Bins(t)
	dir := shortTempDir(t)
	w := &spireWorld{spireAgent: agentBin}
	w.server = spiretest.StartServer(t, serverBin, dir, td)
	var err error
	w.bundle, err = w.server.BundlePEM()
	g.Expect(err).NotTo(HaveOccurred())

	// The operator registers the bootstrap service under the ID VMs accept.
	token := w.server.JoinToken(t, time.Minute)
	w.server.Register(t, identity.BootstrapServiceID(td), token)
	_, w.serviceAPI = spiretest.StartAgent(t, "spire-agent-service", agentBin, filepath.Join(dir, "svc"), w.server, token)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	waitCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	source, err := workloadapi.NewX509Source(waitCtx, workloadapi.WithClientOptions(workloadapi.WithAddr(w.serviceAPI)))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = source.Close() })
	srv, err := service.New(service.Options{Client: env.Client, SPIRE: source, Platforms: bootstraptest.Platforms(env.Client)})
	g.Expect(err).NotTo(HaveOccurred())
	w.serviceURL, err = srv.Start(ctx, "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())

	w.provisioner, err = spire.NewProvisioner(ctx, spire.Config{Address: w.server.Address, Selectors: []string{spiretest.UIDSelectorString()}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = w.provisioner.Close() })
	w.gh = fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	w.fleet = bootstraptest.NewFleet(t, env.Client, w.gh)
	return w
}

// spireVM is one VM attesting with SPIRE: the HyperFleet agent's config as rendered for it, and
// the VM's spire-agent once started.
type spireVM struct {
	*vm
	workloadAPI string
}

// newVM provisions a Machine through SPIRE (token and registration entry) and renders its agent
// config; provider says what its BootstrapConfig names.
func (w *spireWorld) newVM(t *testing.T, name string, provider bootstrapv1.IdentityProvider, runner bootstrapv1.RunnerSpec) *spireVM {
	t.Helper()
	g := NewWithT(t)
	v := &vm{gh: w.gh, fleet: w.fleet, dir: shortTempDir(t)}
	v.machine = w.fleet.NewMachine(t, name, w.provisioner, td, time.Minute)
	cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
	cfg.Spec.Attestation = bootstrapv1.AttestationSpec{Provider: provider, SPIREServerAddress: w.server.Address}
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())

	v.poweroff = filepath.Join(v.dir, "powered-off")
	runner.Directory = filepath.Join(v.dir, "actions-runner")
	spec := bootstrapv1.BootstrapConfigSpec{Runner: runner, Agent: bootstrapv1.AgentSpec{PowerOffCommand: []string{"touch", v.poweroff}}}
	ac := bootstrap.AgentConfig(bootstrap.Input{
		Namespace: w.fleet.Namespace, Machine: name, Spec: spec, ServiceURL: w.serviceURL, TrustDomain: td.Name(),
		TrustBundlePEM: w.bundle, Platform: "github", Labels: w.fleet.Labels,
		Credential: identity.Credential{ID: v.machine.ID, JoinToken: v.machine.Token, ExpiresAt: time.Now().Add(time.Minute)},
		SPIRE:      &bootstrap.SPIREAgent{ServerAddress: "127.0.0.1:" + strconv.Itoa(w.server.Port)},
	})
	g.Expect(ac.JoinToken).To(BeEmpty(), "the HyperFleet agent never holds spire-agent's token")
	g.Expect(ac.Attestation).To(Equal(agent.AttestationSPIRE))
	// The VM's spire-agent files live in the test's directory, not under /run and /etc.
	paths := spirelocal.AgentPathsIn(filepath.Join(v.dir, "spire"))
	ac.WorkloadAPIAddress, ac.SPIREAgentConfigPath = paths.WorkloadAPI(), paths.Config
	data, err := ac.Marshal()
	g.Expect(err).NotTo(HaveOccurred())
	v.config = filepath.Join(v.dir, "agent.yaml")
	g.Expect(os.WriteFile(v.config, data, 0o600)).To(Succeed())
	return &spireVM{vm: v, workloadAPI: ac.WorkloadAPIAddress}
}

// startSPIREAgent boots the VM's spire-agent with token, as its cloud-init unit does.
func (w *spireWorld) startSPIREAgent(t *testing.T, v *spireVM, token string) {
	t.Helper()
	_, api := spiretest.StartAgent(t, "spire-agent-"+v.machine.Machine.Name, w.spireAgent, filepath.Join(v.dir, "spire"), w.server, token)
	NewWithT(t).Expect(api).To(Equal(v.workloadAPI))
}

// TestAgentWithSPIRE runs the whole SPIRE path with real SPIRE processes: spire-agent redeems the
// VM's join token, the HyperFleet agent takes the machine's SVID from the Workload API, and the
// bootstrap service, holding an SVID from SPIRE itself, hands it its runner config.
func TestAgentWithSPIRE(t *testing.T) {
	w := newSPIREWorld(t)

	t.Run("a VM attested by SPIRE runs one job and powers off", func(t *testing.T) {
		g := NewWithT(t)
		tarball, sum := runnerTarball(t)
		pkg := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write(tarball) }))
		t.Cleanup(pkg.Close)
		v := w.newVM(t, "runner-spire", bootstrapv1.IdentitySPIRE, bootstrapv1.RunnerSpec{
			DownloadURL: pkg.URL + "/actions-runner.tar.gz", SHA256: sum, IdleTimeout: &metav1.Duration{Duration: 30 * time.Second}})
		job := w.gh.CreateJob(w.fleet.Repo, []string{"self-hosted", "linux"})
		w.startSPIREAgent(t, v, v.machine.Token)

		out, err := v.boot(t, "--retry-window", "40s")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(v.machine.ID.String()), "the agent holds the machine's SPIFFE ID")
		g.Expect(v.poweredOff()).To(BeTrue(), out)
		done, _ := w.gh.Job(job.ID)
		g.Expect(done.Status).To(Equal("completed"), out)
		g.Expect(done.RunnerName).To(Equal("runner-spire"))
		g.Expect(w.gh.VerifyEachJobRanOnce()).To(Succeed())

		cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
		g.Expect(conditions.IsTrue(cfg, bootstrapv1.AttestedCondition)).To(BeTrue())
		g.Expect(cfg.Status.AttestedTime).NotTo(BeNil())
		spireConf, err := os.ReadFile(filepath.Join(v.dir, "spire", "agent.conf"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(spireConf)).To(ContainSubstring("trust_domain"))
		g.Expect(string(spireConf)).NotTo(ContainSubstring(v.machine.Token), "the spent join token is scrubbed from spire-agent's config")

		// The SVID is still the VM's, but its runner config was handed out once.
		status, _ := w.get(t, v.workloadAPI, protocol.RunnerConfigPath)
		g.Expect(status).To(Equal(http.StatusConflict))
	})

	t.Run("a SPIRE SVID of a machine not attested by SPIRE is refused", func(t *testing.T) {
		g := NewWithT(t)
		v := w.newVM(t, "runner-builtin", bootstrapv1.IdentityBuiltin, bootstrapv1.RunnerSpec{IdleTimeout: &metav1.Duration{Duration: 2 * time.Second}})
		installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))
		w.startSPIREAgent(t, v, v.machine.Token)
		out, err := v.boot(t, "--retry-window", "40s")
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring("CredentialsRefused"))
		g.Expect(out).To(ContainSubstring("403"))
		g.Expect(v.poweredOff()).To(BeTrue(), out)
		g.Expect(w.gh.Runners()).To(BeEmpty())
	})

	t.Run("a VM whose spire-agent cannot attest powers off", func(t *testing.T) {
		g := NewWithT(t)
		v := w.newVM(t, "runner-unattested", bootstrapv1.IdentitySPIRE, bootstrapv1.RunnerSpec{IdleTimeout: &metav1.Duration{Duration: 2 * time.Second}})
		installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))
		w.startSPIREAgent(t, v, "not-a-token-the-server-issued")
		out, err := v.boot(t, "--retry-window", "3s")
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring("CredentialsRefused"))
		g.Expect(v.poweredOff()).To(BeTrue(), out)
		cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
		g.Expect(cfg.Status.RunnerConfigTime).To(BeNil())
	})

	t.Run("workloads that are not machines are refused at the handshake", func(t *testing.T) {
		g := NewWithT(t)
		// The service's own SVID is valid in the trust domain, but it names no machine.
		_, err := w.get(t, w.serviceAPI, protocol.RunnerConfigPath)
		g.Expect(err).To(MatchError(ContainSubstring("tls")))
	})
}

// get calls the bootstrap service with the SVID the Workload API at api gives the test process.
func (w *spireWorld) get(t *testing.T, api, path string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	source, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(api)))
	if err != nil {
		t.Fatalf("SVID from %s: %v", api, err)
	}
	defer source.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeID(identity.BootstrapServiceID(td)))}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(w.serviceURL + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// shortTempDir keeps Unix socket paths under their 108-byte limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
