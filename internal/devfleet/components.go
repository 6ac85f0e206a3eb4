package devfleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all" // registers every CI platform
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TokenLifetime is how long the manager's and the bootstrap service's ServiceAccount tokens last: a
// fleet running longer stops being allowed anything and must be restarted.
const TokenLifetime = 24 * time.Hour

func (f *Fleet) fileLogger(name string) (*slog.Logger, error) {
	w, err := f.logFile(name)
	if err != nil {
		return nil, err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(f.opts.LogLevel))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

func (f *Fleet) startGitHub() error {
	log, err := f.fileLogger("fake-github.log")
	if err != nil {
		return err
	}
	if f.GitHub, err = fakegithub.New(fakegithub.Options{Logger: log, TLS: true, RecordJITConfigs: true}); err != nil {
		return err
	}
	if err := f.GitHub.Start(f.listenAddr()); err != nil {
		return err
	}
	p := f.opts.Pool
	repo := jobRepository(p)
	f.GitHub.AddRepository(repo)
	scope := p.Organization
	if p.Repository != "" {
		scope = p.Repository
	}
	caFile := filepath.Join(f.stateDir, "github-ca.crt")
	if err := os.WriteFile(caFile, f.GitHub.CACertPEM(), 0o600); err != nil {
		return err
	}
	url := f.GitHub.URL()
	f.State.GitHub = GitHubState{URL: url, AppID: f.GitHub.AppID(), InstallationID: f.GitHub.InstallationID(scope),
		Organization: p.Organization, Repository: repo, JobsURL: url + "/_fake/jobs", RunnersURL: url + "/_fake/runners",
		CAFile: caFile}
	return nil
}

func (f *Fleet) startSimulator(agentBin string) error {
	log, err := f.fileLogger("pve-simulator.log")
	if err != nil {
		return err
	}
	tokenID, secret := "hyperfleet@pve!dev", randomHex(16)
	b := &booter{agentBin: agentBin, spireAgentBin: f.spireAgentBin, logDir: f.State.LogDir, jobDuration: f.opts.JobDuration, observe: f.opts.OnVMEvent}
	cfg := pvesim.Config{
		Tokens:       []pvesim.Token{{ID: tokenID, Secret: secret}},
		TaskDuration: 100 * time.Millisecond, BootDelay: 500 * time.Millisecond,
		BootHook: b.hook, Logger: log, Seed: time.Now().UnixNano(),
	}
	if f.opts.GuestImage != "" {
		cfg.Guest = &pvesim.QEMUGuest{Image: f.opts.GuestImage, Dir: filepath.Join(f.stateDir, "guests"), KeepDisks: true}
	}
	sim, err := pvesim.New(cfg)
	if err != nil {
		return err
	}
	if err := sim.Start(f.listenAddr()); err != nil {
		return err
	}
	f.Simulator = sim
	if f.opts.GuestImage != "" {
		// What a runner reaches besides the bootstrap service: the CI platform and its download.
		urls := []string{f.State.GitHub.URL}
		for _, r := range f.runners {
			urls = append(urls, r.URL)
		}
		if err := f.forwardToGuests(urls...); err != nil {
			return err
		}
	}
	caFile := filepath.Join(f.stateDir, "pve-ca.crt")
	if err := os.WriteFile(caFile, sim.CACertPEM(), 0o600); err != nil {
		return err
	}
	f.State.Proxmox = ProxmoxState{URL: sim.URL(), TokenID: tokenID, TokenSecret: secret, AdminURL: sim.AdminURL(), CAFile: caFile}
	return nil
}

// platforms is the CI platform Source of the bootstrap services, built and instrumented once as
// cmd/bootstrap-service does, and shared by the builtin and the SPIRE service.
func (f *Fleet) platforms(c client.Reader) platform.Source {
	if f.bootstrapPlatforms == nil {
		src, err := platform.NewSource(platform.Inputs{Reader: c})
		if err != nil {
			panic(err) // no registered platform fails to build from a Reader
		}
		f.bootstrapPlatforms = pinstrumented.Source(src)
	}
	return f.bootstrapPlatforms
}

func (f *Fleet) startBootstrapService(ctx, runCtx context.Context) error {
	c, err := f.bootstrapServiceClient()
	if err != nil {
		return err
	}
	ca, err := builtin.LoadOrCreateCA(ctx, c, f.Installation.CASecret, spiffeid.RequireTrustDomainFromString(TrustDomain))
	if err != nil {
		return err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if f.opts.GuestImage != "" {
		ips = append(ips, net.ParseIP(pvesim.GuestForwardIP))
	}
	srv, err := service.New(service.Options{
		Client: c, CA: ca, Attestor: &builtin.Attestor{Client: c, CA: ca}, Platforms: f.platforms(c),
		IPs: ips, Logger: f.log.WithName("bootstrap-service"),
	})
	if err != nil {
		return err
	}
	// VMs are local processes here, so loopback is where they reach the service; QEMU guests reach
	// it at the address the simulator forwards to them.
	if f.State.Bootstrap.URL, err = srv.Start(runCtx, "127.0.0.1:0"); err != nil {
		return err
	}
	if f.opts.GuestImage != "" {
		if err := f.forwardToGuests(f.State.Bootstrap.URL); err != nil {
			return err
		}
		f.State.Bootstrap.URL = guestURL(f.State.Bootstrap.URL)
	}
	if f.opts.Identity == IdentitySPIRE {
		return f.startSPIRE(ctx, runCtx)
	}
	return nil
}

func (f *Fleet) startManager(ctx, runCtx context.Context, webhookSecret, gitlabSecret, buildkiteSecret string) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	metrics, health, hooks := loopback(ports[0]), loopback(ports[1]), loopback(ports[2])
	cfg := &config.Manager{
		LogLevel: f.opts.LogLevel, MetricsBindAddress: metrics, HealthProbeBindAddress: health,
		LeaderElectionID: "hyperfleet-dev", Concurrency: 4, SyncPeriod: 10 * time.Minute,
		SweepInterval: f.opts.SweepInterval, OrphanGracePeriod: time.Minute, ProviderTimeout: 10 * time.Second,
		WebhookBindAddress: hooks,
		WebhookSecrets: map[platform.Kind]string{platform.KindGitHub: webhookSecret, platform.KindGitLab: gitlabSecret,
			platform.KindBuildkite: buildkiteSecret},
		BootstrapServiceURL:          f.State.Bootstrap.URL,
		WorkloadReaderServiceAccount: f.Installation.WorkloadReader.String(),
		BootstrapCASecret:            f.Installation.CASecret.String(), TrustDomain: TrustDomain, RepairInterval: f.opts.RepairInterval,
		HistoryURL: f.historyURL(),
	}
	if s := f.State.SPIRE; s != nil {
		cfg.SPIREAdminAddress, cfg.SPIREAgentServerAddress = s.AdminAddress, s.AgentServerAddress
		cfg.SPIREBootstrapServiceURL = f.State.Bootstrap.SPIREURL
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	mgr, err := manager.New(ctx, f.Installation.Manager, cfg, func(o *controllers.Options) {
		// The fleet's VMs run their agent as this user, not as root.
		o.SPIRESelectors = []string{spirelocal.UIDSelectorString()}
		// A person watching wants VMs to appear within a second, not at production's pace.
		o.Pace.TaskPollInterval = 200 * time.Millisecond
		o.Pace.TemplateCheckInterval = 30 * time.Second
		o.Pace.ProviderTaskPollInterval = 100 * time.Millisecond
	})
	if err != nil {
		return err
	}
	f.mgrDone = make(chan error, 1)
	go func() { f.mgrDone <- mgr.Start(runCtx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return fmt.Errorf("manager caches did not sync: %w", syncCtx.Err())
	}
	if err := waitListening(ctx, hooks); err != nil {
		return fmt.Errorf("webhook receiver: %w", err)
	}
	f.State.HistoryURL = cfg.HistoryURL
	f.State.Manager = ManagerState{MetricsURL: "http://" + metrics + "/metrics", HealthURL: "http://" + health + "/healthz"}
	f.State.Webhook = WebhookState{URL: "http://" + hooks + "/webhooks/github", Secret: webhookSecret}
	return nil
}

func (f *Fleet) applySample(ctx context.Context, gitlabToken, buildkiteToken string) error {
	// As docs/install.md tells an admin: enable the team's namespace, then create its fleet.
	if err := f.Env.EnableNamespace(ctx, f.opts.Namespace); err != nil {
		return err
	}
	p := f.State.Proxmox
	// The objects of every platform's pool; those they share (the hypervisor, the Cluster, the
	// claim template) are created once.
	created := map[string]bool{}
	for _, platform := range f.opts.platforms {
		in := sampleInput{
			namespace: f.opts.Namespace, pool: f.opts.poolFor(platform), bootstrapTemplate: TemplateName,
			proxmoxURL: strings.TrimSuffix(p.URL, "/api2/json"), proxmoxCA: f.Simulator.CACertPEM(),
			tokenID: p.TokenID, tokenSecet: p.TokenSecret,
			githubURL: f.State.GitHub.URL, githubCA: f.GitHub.CACertPEM(), appID: f.State.GitHub.AppID, appKeyPEM: f.GitHub.AppKeyPEM(),
			installationID: f.State.GitHub.InstallationID,
			runnerURL:      f.runners[platform].URL, runnerSH: f.runners[platform].SHA256,
			spire:      f.State.SPIRE,
			hypervisor: f.opts.Hypervisor, hyperv: f.State.HyperV, hypervCA: f.hypervCA(),
			vsphere: f.State.VSphere, vsphereCA: f.vsphereCA(),
		}
		switch platform {
		case PlatformGitLab:
			in.gitlab, in.gitlabToken, in.gitlabCA = f.State.GitLab, gitlabToken, f.gitlabCA()
		case PlatformBuildkite:
			in.buildkite, in.buildkiteToken, in.buildkiteCA = f.State.Buildkite, buildkiteToken, f.buildkiteCA()
		}
		if f.opts.mixed() {
			// Each pool's VMs download their own platform's runner program.
			in.bootstrapTemplate = TemplateName + "-" + platform
			f.State.Pools = append(f.State.Pools, PoolState{Platform: platform, Name: in.pool.Name, Labels: in.pool.Labels,
				Queue: queueOf(platform, in.pool), Runner: f.runners[platform]})
		}
		for _, o := range sampleFleet(in) {
			key := fmt.Sprintf("%T/%s", o, o.GetName())
			if _, isNamespace := o.(*corev1.Namespace); isNamespace || created[key] {
				continue // created when it was enabled, or for another platform's pool
			}
			if pool, isPool := o.(*fleetv1.RunnerPool); isPool && len(pool.Spec.Template.Targets) > 0 {
				// A pool places its first runners on the targets that are up when it starts (they
				// never move): let every HypervisorCluster connect first, so the floor spreads.
				if err := f.waitHypervisorClustersAvailable(ctx); err != nil {
					return err
				}
			}
			if err := f.Env.Client.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
			}
			created[key] = true
		}
	}
	return nil
}

func queueOf(platform string, p PoolOptions) string {
	if platform == PlatformBuildkite {
		return p.Queue
	}
	return ""
}

// bootstrapServiceClient talks to the API server as the installation's bootstrap service.
func (f *Fleet) bootstrapServiceClient() (client.Client, error) {
	return client.New(f.Installation.BootstrapService, client.Options{Scheme: f.Env.Scheme})
}

// waitListening waits until something accepts connections on addr.
func waitListening(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on %s: %w", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listenAddr is where the fakes of the outside world listen: loopback, or for an installed
// HyperFleet the address its pods reach.
func (f *Fleet) listenAddr() string {
	if in := f.opts.Installed; in != nil {
		return net.JoinHostPort(in.ListenIP, "0")
	}
	return "127.0.0.1:0"
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		// Held open until all are chosen, so the n ports differ.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// gitlabCA is the fake GitLab's certificate, nil without one.
func (f *Fleet) gitlabCA() []byte {
	if f.GitLab == nil {
		return nil
	}
	return f.GitLab.CACertPEM()
}

// hypervCA is the simulated Hyper-V host's CA certificate, nil when it does not run.
func (f *Fleet) hypervCA() []byte {
	if f.HyperV == nil {
		return nil
	}
	return f.HyperV.CAPEM
}

// waitHypervisorClustersAvailable waits until every HypervisorCluster of the sample namespace is
// Available.
func (f *Fleet) waitHypervisorClustersAvailable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		list := &infrav1.HypervisorClusterList{}
		err := f.Env.Client.List(ctx, list, client.InNamespace(f.opts.Namespace))
		waiting := ""
		for i := range list.Items {
			if !conditions.IsTrue(&list.Items[i], infrav1.HypervisorClusterAvailableCondition) {
				waiting = list.Items[i].Name
			}
		}
		if err == nil && waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("HypervisorCluster %s did not become Available (%v): %w", waiting, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// historyURL is the store the manager records jobs in and the console reads and audits in: one
// SQLite file both processes' connections share (the fleet runs both in this process), unless the
// fleet was given another.
func (f *Fleet) historyURL() string {
	if f.opts.HistoryURL != "" {
		return f.opts.HistoryURL
	}
	return "sqlite://" + filepath.Join(f.stateDir, "history.db")
}
