package scale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all" // registers every CI platform
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

const (
	trustDomain = "hyperfleet.local"
	namespace   = "scale"
	poolName    = "burst"
	org         = "acme"
	repo        = "acme/app"
	// firstVMID is where the HypervisorCluster's VMID range starts; foreign VMs sit below it.
	firstVMID = 10000
)

var runnerLabels = []string{"linux", "x64"}

// options shape a run.
type options struct {
	// dir receives the logs and the built manager.
	dir string
	// maxRunners is the pool's maxReplicas; minRunners its floor.
	minRunners, maxRunners int32
	model                  pvesim.LoadModel
	// nodes each hold one copy of the runner template on local-lvm (three by default).
	nodes int
	// sweep is the manager's --sweep-interval (production's 30s by default).
	sweep time.Duration
	// repair is the manager's --repair-interval.
	repair time.Duration
	// capiArgs are extra flags of the Cluster API manager (its client's QPS, concurrency).
	capiArgs []string
	// guests are the VMs' guest OS.
	guests *guests
	// jitPerWindow limits JIT configs per installation per model minute, as GitHub does.
	jitPerWindow int
	// githubHourlyBudget is the fake GitHub's REST budget per installation and hour; zero is its
	// default, 5,000 (an App installation on a plain organization).
	githubHourlyBudget int
	// foreign VMs (not HyperFleet's) are seeded on the cluster to check they stay untouched.
	foreign int
	// logLevel of the manager.
	logLevel string
	// labels are the Proxmox pool's runner labels (linux, x64 by default).
	labels []string
	// hyperv adds a simulated Hyper-V host, its HypervisorCluster and Cluster, and a second pool
	// (min/max as the first) with hypervLabels.
	hyperv       bool
	hypervLabels []string
	// orphanGrace and providerTimeout are the manager's settings of those names (production's
	// 5m and 30s by default).
	orphanGrace, providerTimeout time.Duration
}

// harness is a running control plane, HyperFleet and the fakes of the outside world.
type harness struct {
	opts      options
	env       *testenv.Env
	inst      *testenv.Installation
	capi      *testenv.CAPIManager
	sim       *pvesim.Simulator
	hv        *hvsim.HyperVHosts
	hvPass    string
	github    *fakegithub.Server
	manager   *managerProcess
	bootstrap *bootstrapService
	clones    *cloneLog
	webhook   string
	secret    string
	log       logr.Logger
}

func (o *options) defaults() {
	if o.nodes == 0 {
		o.nodes = 3
	}
	if o.sweep == 0 {
		o.sweep = 30 * time.Second
	}
	if o.repair == 0 {
		o.repair = time.Minute
	}
	if o.logLevel == "" {
		o.logLevel = "INFO"
	}
	if len(o.labels) == 0 {
		o.labels = runnerLabels
	}
	if o.orphanGrace == 0 {
		o.orphanGrace = 5 * time.Minute
	}
	if o.providerTimeout == 0 {
		o.providerTimeout = 30 * time.Second
	}
}

// start brings everything up and creates the pool. On error what was started is stopped.
func start(ctx context.Context, o options) (_ *harness, err error) {
	o.defaults()
	h := &harness{opts: o, clones: newCloneLog()}
	defer func() {
		if err != nil {
			h.stop()
		}
	}()
	logf, err := os.Create(filepath.Join(o.dir, "harness.log"))
	if err != nil {
		return nil, err
	}
	if h.log, err = logging.New("INFO", logf); err != nil {
		return nil, err
	}
	bin, err := buildManager(ctx, mustRepoRoot(), o.dir)
	if err != nil {
		return nil, err
	}
	if h.env, err = testenv.Start(); err != nil {
		return nil, err
	}
	if h.inst, err = h.env.Install(ctx, 24*time.Hour); err != nil {
		return nil, err
	}
	if h.capi, err = h.env.StartCAPIManager(ctx, h.opts.capiArgs...); err != nil {
		return nil, err
	}
	if err := h.startGitHub(); err != nil {
		return nil, err
	}
	if err := h.startSimulator(); err != nil {
		return nil, err
	}
	if o.hyperv {
		if err := h.startHyperV(); err != nil {
			return nil, err
		}
	}
	if h.bootstrap, err = h.startBootstrapService(ctx); err != nil {
		return nil, err
	}
	if err := h.startManager(bin); err != nil {
		return nil, err
	}
	if err := h.env.EnableNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	for _, obj := range h.objects() {
		if err := h.env.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return h, nil
}

func mustRepoRoot() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}

func (h *harness) fileLogger(name string, level slog.Level) (*slog.Logger, error) {
	f, err := os.Create(filepath.Join(h.opts.dir, name))
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})), nil
}

func (h *harness) startGitHub() error {
	log, err := h.fileLogger("fake-github.log", slog.LevelWarn)
	if err != nil {
		return err
	}
	window := time.Duration(float64(time.Minute) / h.opts.model.ScaleFactor())
	if h.github, err = fakegithub.New(fakegithub.Options{Logger: log, TLS: true, SharedRunnerKey: true,
		JITPerWindow: h.opts.jitPerWindow, JITWindow: window, RateLimit: h.opts.githubHourlyBudget}); err != nil {
		return err
	}
	if err := h.github.Start("127.0.0.1:0"); err != nil {
		return err
	}
	h.github.AddRepository(repo)
	return nil
}

// simulatorToken is the API token the HypervisorCluster's credentials Secret holds.
var simulatorToken = pvesim.Token{ID: "hyperfleet@pve!scale", Secret: randomHex(16)}

func (h *harness) startSimulator() error {
	inv := &pvesim.Inventory{ClusterName: "scale", Storages: []pvesim.StorageSpec{
		{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}, TotalGiB: 1 << 20},
		{Name: "local", Type: "dir", Content: []string{"iso", "snippets"}, TotalGiB: 1 << 16},
	}}
	for i := range h.opts.nodes {
		node := "pve" + strconv.Itoa(i+1)
		inv.Nodes = append(inv.Nodes, pvesim.NodeSpec{Name: node, CPUs: 1024, MemoryMiB: 1 << 22})
		inv.VMs = append(inv.VMs, pvesim.RunnerTemplate(9000+i, node, "runner", "32G", "runner", "template"))
	}
	for i := range h.opts.foreign {
		node := "pve" + strconv.Itoa(i%h.opts.nodes+1)
		inv.VMs = append(inv.VMs, pvesim.VMSpec{VMID: 100 + i, Node: node, Name: fmt.Sprintf("foreign-%d", i),
			Running: i%2 == 0, Tags: []string{"prod"}, Config: map[string]string{
				"cores": "2", "sockets": "1", "memory": "2048", "ostype": "l26",
				"scsi0": fmt.Sprintf("local-lvm:vm-%d-disk-0,size=8G", 100+i),
				"net0":  fmt.Sprintf("virtio=BC:24:11:BB:%02X:%02X,bridge=vmbr0", (100+i)/100%256, (100+i)%100),
			}})
	}
	fileLog, err := h.fileLogger("pve-simulator.log", slog.LevelWarn)
	if err != nil {
		return err
	}
	h.sim, err = pvesim.New(pvesim.Config{
		Inventory: inv, Tokens: []pvesim.Token{simulatorToken}, Load: h.opts.model,
		BootDelay: h.opts.model.Wall(5 * time.Second), BootHook: h.opts.guests.hook, Seed: 7,
		Logger: slog.New(h.clones.handler(fileLog.Handler())),
	})
	if err != nil {
		return err
	}
	return h.sim.Start("127.0.0.1:0")
}

// hypervHost is the simulated Hyper-V host's name.
const hypervHost = "hv1"

// startHyperV starts one simulated Hyper-V host over WS-Management with TLS, whose VMs boot the
// same guest as the Proxmox simulator's.
func (h *harness) startHyperV() error {
	h.hvPass = randomHex(12)
	var err error
	h.hv, err = hvsim.StartHyperV(hvsim.HyperVConfig{BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		return h.opts.guests.hook(ctx, pvesim.BootVM{Node: vm.Host, Name: vm.Name, IP: vm.IP, MAC: vm.MAC,
			UserData: vm.UserData, MetaData: vm.MetaData, PowerOff: vm.PowerOff})
	}}, hvsim.Options{Users: map[string]string{hvsim.HyperVTestUser: h.hvPass}}, hypervHost)
	if err != nil {
		return fmt.Errorf("starting the Hyper-V simulator: %w", err)
	}
	for i := range h.opts.foreign {
		if _, err := h.hv.AddVM(hypervHost, fmt.Sprintf("foreign-%d", i), "a team's own VM", i%2 == 0); err != nil {
			return err
		}
	}
	return nil
}

// bootstrapService is the bootstrap service in this process, on a fixed address so that it can
// be stopped and started again (a restart) where the VMs know to find it.
type bootstrapService struct {
	h      *harness
	addr   string
	url    string
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	src    platform.Source
}

func (h *harness) startBootstrapService(ctx context.Context) (*bootstrapService, error) {
	b := &bootstrapService{h: h, addr: "127.0.0.1:0"}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bootstrapService) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := client.New(b.h.inst.BootstrapService, client.Options{Scheme: b.h.env.Scheme})
	if err != nil {
		return err
	}
	ca, err := builtin.LoadOrCreateCA(ctx, c, b.h.inst.CASecret, spiffeid.RequireTrustDomainFromString(trustDomain))
	if err != nil {
		return err
	}
	if b.src == nil {
		src, err := platform.NewSource(platform.Inputs{Reader: c})
		if err != nil {
			return err
		}
		b.src = pinstrumented.Source(src)
	}
	srv, err := service.New(service.Options{Client: c, CA: ca, Attestor: &builtin.Attestor{Client: c, CA: ca},
		Platforms: b.src, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Logger: b.h.log.WithName("bootstrap-service")})
	if err != nil {
		return err
	}
	var l net.Listener
	for attempt := 0; ; attempt++ {
		// The old listener's port may take a moment to be free again after a restart.
		if l, err = net.Listen("tcp", b.addr); err == nil || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	b.addr, b.url = l.Addr().String(), "https://"+l.Addr().String()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(runCtx, l) }()
	b.cancel, b.done = cancel, done
	return nil
}

// stop ends the service; VMs calling it meanwhile get connection errors and retry.
func (b *bootstrapService) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
		<-b.done
		b.cancel = nil
	}
}

func (h *harness) startManager(bin string) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(h.opts.dir, "manager.kubeconfig")
	if err := writeKubeconfig(h.inst.Manager, kubeconfig); err != nil {
		return err
	}
	h.secret = randomHex(20)
	webhookAddr := fmt.Sprintf("127.0.0.1:%d", ports[2])
	scale := h.opts.model.ScaleFactor()
	h.manager = &managerProcess{bin: bin, kubeconfig: kubeconfig, logPath: filepath.Join(h.opts.dir, "manager.log"),
		pprof: fmt.Sprintf("127.0.0.1:%d", ports[3]),
		args: []string{
			fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", ports[3]),
			"--log-level=" + h.opts.logLevel,
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--metrics-secure=false",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[1]),
			"--webhook-bind-address=" + webhookAddr,
			"--bootstrap-service-url=" + h.bootstrap.url,
			"--bootstrap-ca-secret=" + h.inst.CASecret.String(),
			"--workload-reader-service-account=" + h.inst.WorkloadReader.String(),
			"--trust-domain=" + trustDomain,
			"--sweep-interval=" + h.opts.sweep.String(),
			"--repair-interval=" + h.opts.repair.String(),
			"--orphan-grace-period=" + h.opts.orphanGrace.String(),
			"--provider-timeout=" + h.opts.providerTimeout.String(),
		},
		env: []string{
			"GITHUB_WEBHOOK_SECRET=" + h.secret,
			// Production's 2s task poll, at the model's time scale.
			"HYPERFLEET_TASK_POLL_INTERVAL=" + time.Duration(float64(2*time.Second)/scale).String(),
			"HYPERFLEET_PROVIDER_TASK_POLL_INTERVAL=" + time.Duration(float64(time.Second)/scale).String(),
		}}
	if err := h.manager.start(); err != nil {
		return err
	}
	h.webhook = "http://" + webhookAddr + "/webhooks/github"
	if err := waitListening(webhookAddr, time.Minute); err != nil {
		return fmt.Errorf("the manager's webhook receiver: %w (see %s)", err, h.manager.logPath)
	}
	h.github.SetWebhook(h.webhook, h.secret)
	return nil
}

// stop ends everything, children first.
func (h *harness) stop() {
	if h.manager != nil {
		h.manager.stop(false)
	}
	if h.opts.guests != nil {
		h.opts.guests.release()
	}
	if h.sim != nil {
		_ = h.sim.Close()
	}
	if h.hv != nil {
		_ = h.hv.Close()
	}
	if h.bootstrap != nil {
		h.bootstrap.stop()
	}
	if h.github != nil {
		h.github.Close()
	}
	if h.capi != nil {
		h.capi.Stop()
	}
	if h.env != nil {
		_ = h.env.Stop()
	}
}

func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return errors.New("nothing listens on " + addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
