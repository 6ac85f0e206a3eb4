package devfleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// TrustDomain is the SPIFFE trust domain of the fleet's VMs.
const TrustDomain = "hyperfleet.local"

// Options configure a local fleet. The zero value is the fleet `make dev` starts.
type Options struct {
	// RepoRoot is the repository checkout (binaries are built from it); found from the working
	// directory when empty.
	RepoRoot string
	// StateDir receives state.json, the kubeconfig, binaries and logs; default
	// <RepoRoot>/.hyperfleet/dev. It is emptied at start: every start is a fresh fleet.
	StateDir string
	// Namespace of the sample fleet; default hyperfleet-dev.
	Namespace string
	// Pool shapes the sample RunnerPool; default min 1, max 5, labels linux,x64, organization acme.
	Pool PoolOptions
	// JobDuration is how long each fake job runs on its runner; default 3s.
	JobDuration time.Duration
	// SweepInterval is how often VMs' power states are swept, i.e. how soon a VM that powered
	// off after its job is deleted; default 2s.
	SweepInterval time.Duration
	// RepairInterval is how often each pool's demand is compared with the CI platform's API;
	// default 30s.
	RepairInterval time.Duration
	// HistoryURL is the store of job records and the audit log, shared by the manager and the
	// console (docs/history.md); default a SQLite file in the state directory, history.db.
	HistoryURL string
	// LogLevel of the manager and the services (their logs go to files under StateDir/logs).
	LogLevel string
	// Identity is who attests the VMs: IdentityBuiltin (default, the bootstrap service's own CA)
	// or IdentitySPIRE (a local spire-server; each VM runs spire-agent, which needs
	// hack/spire.sh's binaries in the tools cache).
	Identity string
	// Platform is the CI platform of the sample pool: PlatformGitHub (default), PlatformGitLab
	// (a fake GitLab, a group pool, and gitlab-runner in each VM) or PlatformBuildkite (a fake
	// Buildkite, a pool of its cluster queue, and buildkite-agent in each VM). The fake GitHub runs
	// either way. A comma-separated list ("github,gitlab,buildkite") or PlatformAll makes a mixed
	// fleet: one pool per platform, named <platform>-<Pool.Name>, side by side on the one
	// hypervisor, each with its own runner package.
	Platform string
	// Hypervisor is where the sample pool's VMs run: HypervisorProxmox (default, the Proxmox
	// simulator), HypervisorHyperV (the Hyper-V WS-Management simulator), HypervisorVSphere
	// (VMware's vCenter simulator), HypervisorBoth (one pool whose targets are Proxmox and
	// Hyper-V) or HypervisorAll (one pool over all three). The Proxmox simulator runs either way.
	Hypervisor string
	// NoConsole leaves the operator console and its identity provider out.
	NoConsole bool
	// ConsoleListen is the console's address; default 127.0.0.1 on a free port.
	ConsoleListen string
	// GuestImage, when set, makes the Proxmox simulator boot every VM as a real guest under QEMU
	// from this qcow2 template image (hack/template.sh) instead of running the agent as a process:
	// real cloud-init reads the seed ISO and the real agent attests over the guest's network, which
	// reaches the bootstrap service, the fake GitHub and the runner download through the addresses
	// the simulator forwards (pvesim.GuestForwardIP). Guests' disks are kept until Stop
	// (Simulator.GuestDisk). OnVMEvent hears nothing of such guests.
	GuestImage string
	// RunnerPackage is the Go package built as the runner program VMs download; default the
	// platform's fake runner.
	RunnerPackage string
	// Installed, when set, runs the fleet's outside world (the Proxmox simulator, the fake GitHub,
	// the runner download and the VMs' agents) for a HyperFleet that runs elsewhere already — its
	// manager and bootstrap service in pods on a real node, installed as users install it —
	// instead of starting an API server, the manager and the bootstrap service here. GitHub, the
	// Proxmox simulator and the builtin identity only; no console.
	Installed *Installed
	// OnVMEvent, if set, hears every VM boot and power-off.
	OnVMEvent func(VMEvent)
	// Progress, if set, hears what Start is doing.
	Progress func(string)

	// platforms is Platform parsed.
	platforms []string
}

// Installed is a HyperFleet installation the fleet serves (Options.Installed).
type Installed struct {
	// Kubeconfig is an administrator's kubeconfig of its cluster; the sample fleet is applied
	// with it, as a person would.
	Kubeconfig string
	// ListenIP is where the simulator and the fake GitHub listen: an address of this machine that
	// the installation's pods reach (a node's pod-bridge address). Their certificates name it.
	ListenIP string
	// WebhookURL is where the fake GitHub delivers workflow_job events (the manager's webhook
	// Service as this machine reaches it), signed with WebhookSecret, the secret the installation's
	// manager was given.
	WebhookURL, WebhookSecret string
}

// Fleet is a running local fleet.
type Fleet struct {
	// State is what state.json says.
	State State
	// Env is the control plane: Env.Client talks to the API server directly.
	Env *testenv.Env
	// Simulator, GitHub and (Platform gitlab) GitLab are the in-process fakes of the outside world.
	Simulator *pvesim.Simulator
	// HyperV is the simulated Hyper-V host (Hypervisor hyperv or both).
	HyperV *hvsim.HyperVHosts
	// VSphere is the simulated vCenter (Hypervisor vsphere or all).
	VSphere *vspheresim.Simulator
	GitHub  *fakegithub.Server
	GitLab  *fakegitlab.Server
	// Buildkite is the fake Buildkite (Platform buildkite only).
	Buildkite *fakebuildkite.Server
	// AppliedAt is when the sample fleet's objects were created.
	AppliedAt time.Time
	// SPIREServer is the fleet's SPIRE server (Identity SPIRE only).
	SPIREServer *spirelocal.Server
	// Installation is HyperFleet's shipped RBAC in the API server; the manager and the bootstrap
	// service run with its ServiceAccounts' tokens, never as an admin.
	Installation *testenv.Installation

	opts     Options
	log      logr.Logger
	capi     *testenv.CAPIManager
	cancel   context.CancelFunc
	stops    []func()
	mgrDone  chan error
	stateDir string
	// spireAgentBin is what each VM runs as its spire-agent (Identity SPIRE only).
	spireAgentBin string
	// bootstrapPlatforms is the bootstrap services' CI platform Source (see platforms).
	bootstrapPlatforms platform.Source
	// runners is the runner package of each platform's pool.
	runners map[string]RunnerState
}

// Identities of Options.Identity.
const (
	IdentityBuiltin = "Builtin"
	IdentitySPIRE   = "SPIRE"
)

// Client talks to the fleet's API server without a cache.
func (f *Fleet) Client() client.Client { return f.Env.Client }

// PoolOptions are the sample pool's settings after defaults.
func (f *Fleet) PoolOptions() PoolOptions { return f.opts.Pool }

func (o *Options) defaults() error {
	if o.RepoRoot == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return err
		}
		o.RepoRoot = root
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir(o.RepoRoot)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	o.Pool.defaults()
	var err error
	if o.platforms, err = parsePlatforms(o.Platform); err != nil {
		return err
	}
	o.Platform = strings.Join(o.platforms, ",")
	switch {
	case o.Platform == PlatformBuildkite:
		o.Pool.buildkiteDefaults()
	case slices.Contains(o.platforms, PlatformBuildkite) && o.Pool.Queue == "":
		o.Pool.Queue = DefaultQueue
	}
	if o.JobDuration == 0 {
		o.JobDuration = 3 * time.Second
	}
	if o.RepairInterval == 0 {
		o.RepairInterval = 30 * time.Second
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = 2 * time.Second
	}
	if o.LogLevel == "" {
		o.LogLevel = "INFO"
	}
	switch o.Hypervisor {
	case "":
		o.Hypervisor = HypervisorProxmox
	case HypervisorProxmox, HypervisorHyperV, HypervisorVSphere, HypervisorBoth, HypervisorAll:
	default:
		return fmt.Errorf("hypervisor %q: want %s, %s, %s, %s or %s", o.Hypervisor, HypervisorProxmox, HypervisorHyperV, HypervisorVSphere, HypervisorBoth, HypervisorAll)
	}
	if in := o.Installed; in != nil {
		switch {
		case o.Platform != PlatformGitHub || o.Hypervisor != HypervisorProxmox || o.Identity == IdentitySPIRE || o.GuestImage != "":
			return fmt.Errorf("a fleet for an installed HyperFleet runs GitHub on the Proxmox simulator with the builtin identity only")
		case in.Kubeconfig == "" || in.ListenIP == "" || in.WebhookURL == "" || in.WebhookSecret == "":
			return fmt.Errorf("a fleet for an installed HyperFleet needs its kubeconfig, a listen address, and the webhook's URL and secret")
		}
		o.NoConsole = true
	}
	switch o.Identity {
	case "":
		o.Identity = IdentityBuiltin
	case IdentityBuiltin, IdentitySPIRE:
	default:
		return fmt.Errorf("identity %q: want %s or %s", o.Identity, IdentityBuiltin, IdentitySPIRE)
	}
	return nil
}

// Start brings the whole fleet up and applies the sample fleet. ctx bounds the start only; the
// fleet runs until Stop. On error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if s, rerr := ReadState(opts.StateDir); rerr == nil {
		return nil, fmt.Errorf("a local fleet (process %d) already runs with state in %s; stop it first", s.PID, opts.StateDir)
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	// A fresh start: nothing of a previous fleet survives (its API server's data was temporary).
	if err := os.RemoveAll(stateDir); err != nil {
		return nil, err
	}
	logDir := filepath.Join(stateDir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f := &Fleet{opts: opts, cancel: cancel, stateDir: stateDir}
	f.State = State{Version: StateVersion, PID: os.Getpid(), Namespace: opts.Namespace, Cluster: ClusterName,
		Pool: opts.poolFor(opts.platforms[0]).Name, Platform: opts.Platform, LogDir: logDir}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, args...))
		}
	}

	logFile, err := os.Create(filepath.Join(logDir, "manager.log"))
	if err != nil {
		return nil, err
	}
	f.stops = append(f.stops, func() { _ = logFile.Close() })
	if f.log, err = logging.New(opts.LogLevel, logFile); err != nil {
		return nil, err
	}
	ctrl.SetLogger(f.log)

	if opts.Identity == IdentitySPIRE {
		if _, f.spireAgentBin, err = spireBinaries(); err != nil {
			return nil, err
		}
	}
	progress("building hyperfleet-agent and the fake runner")
	var agentBin string
	f.runners = map[string]RunnerState{}
	for _, p := range opts.platforms {
		bin, runnerBin, err := buildBinaries(ctx, opts.RepoRoot, filepath.Join(stateDir, "bin"), p, opts.RunnerPackage)
		if err != nil {
			return nil, err
		}
		agentBin = bin
		pkg, sum, err := runnerPackage(runnerBin, p)
		if err != nil {
			return nil, err
		}
		url, err := serveArtifacts(runCtx, pkg)
		if err != nil {
			return nil, err
		}
		if opts.GuestImage != "" {
			url = guestURL(url)
		}
		f.runners[p] = RunnerState{URL: url, SHA256: sum}
	}
	f.State.Runner = f.runners[opts.platforms[0]]

	if opts.Installed != nil {
		if f.Env, err = testenv.Connect(opts.Installed.Kubeconfig); err != nil {
			return nil, err
		}
		f.State.APIServer = f.Env.Config.Host
		f.State.Kubectl = f.Env.Tools.Kubectl()
		f.State.Kubeconfig = opts.Installed.Kubeconfig
	} else if err := f.startControlPlane(ctx, progress); err != nil {
		return nil, err
	}

	progress("starting the fake GitHub API and the Proxmox VE simulator")
	if err := f.startGitHub(); err != nil {
		return nil, err
	}
	var gitlabToken, buildkiteToken string
	if slices.Contains(opts.platforms, PlatformBuildkite) {
		progress("starting the fake Buildkite")
		if buildkiteToken, err = f.startBuildkite(); err != nil {
			return nil, err
		}
	}
	if slices.Contains(opts.platforms, PlatformGitLab) {
		progress("starting the fake GitLab")
		if gitlabToken, err = f.startGitLab(); err != nil {
			return nil, err
		}
	}
	if err := f.startSimulator(agentBin); err != nil {
		return nil, err
	}
	if usesHyperV(opts.Hypervisor) {
		progress("starting the Hyper-V simulator")
		if err := f.startHyperV(agentBin); err != nil {
			return nil, err
		}
	}
	if usesVSphere(opts.Hypervisor) {
		progress("starting the vCenter simulator")
		if err := f.startVSphere(agentBin); err != nil {
			return nil, err
		}
	}

	webhookSecret, gitlabSecret, buildkiteSecret := randomHex(20), randomHex(20), randomHex(20)
	if opts.Pool.GitHubDemand == fleetv1.GitHubDemandPolling {
		webhookSecret = "" // no /webhooks/github route: a site no webhook can reach
	}
	if in := opts.Installed; in != nil {
		webhookSecret = in.WebhookSecret
		f.State.Webhook = WebhookState{URL: in.WebhookURL, Secret: in.WebhookSecret}
	} else {
		progress("starting the bootstrap service and HyperFleet's manager")
		if err := f.startBootstrapService(ctx, runCtx); err != nil {
			return nil, err
		}
		if err := f.startManager(ctx, runCtx, webhookSecret, gitlabSecret, buildkiteSecret); err != nil {
			return nil, err
		}
	}
	if webhookSecret != "" {
		f.GitHub.SetWebhook(f.State.Webhook.URL, webhookSecret)
	}
	if f.GitLab != nil {
		f.State.GitLab.WebhookURL = strings.TrimSuffix(f.State.Webhook.URL, "github") + "gitlab"
		f.GitLab.SetWebhook(f.State.GitLab.WebhookURL, gitlabSecret)
	}
	if f.Buildkite != nil {
		f.State.Buildkite.WebhookURL = strings.TrimSuffix(f.State.Webhook.URL, "github") + "buildkite"
		// Signed, so the receiver's replay window is exercised on every delivery.
		f.Buildkite.SetWebhook(f.State.Buildkite.WebhookURL, buildkiteSecret, true)
	}

	progress("enabling namespace %s for HyperFleet and applying the sample fleet there", opts.Namespace)
	if err := f.applySample(ctx, gitlabToken, buildkiteToken); err != nil {
		return nil, err
	}
	f.AppliedAt = time.Now()
	if !opts.NoConsole {
		progress("starting the operator console and its identity provider")
		if err := f.startConsole(ctx, runCtx); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	if opts.Installed == nil {
		// A real cluster's kube-controller-manager collects its own garbage.
		go collectGarbage(runCtx, f.Env.Client, opts.Namespace, 5*time.Second)
	}
	f.State.StartedAt = time.Now().UTC()
	if err := WriteState(stateDir, &f.State); err != nil {
		return nil, err
	}
	return f, nil
}

// startControlPlane starts the API server with HyperFleet's shipped RBAC and Cluster API's core
// manager, for a fleet whose HyperFleet runs here.
func (f *Fleet) startControlPlane(ctx context.Context, progress func(string, ...any)) (err error) {
	progress("starting kube-apiserver and etcd")
	if f.Env, err = testenv.Start(); err != nil {
		return err
	}
	f.State.APIServer = f.Env.Config.Host
	f.State.Kubectl = f.Env.Tools.Kubectl()
	f.State.Kubeconfig = filepath.Join(f.stateDir, "kubeconfig")
	if err := copyFile(f.Env.KubeconfigPath, f.State.Kubeconfig); err != nil {
		return err
	}

	// The manager and the bootstrap service get exactly the permissions an installation gives them,
	// so a missing or an excess permission shows up here rather than on a user's cluster.
	if f.Installation, err = f.Env.Install(ctx, TokenLifetime); err != nil {
		return err
	}

	progress("starting the Cluster API core manager")
	if f.capi, err = f.Env.StartCAPIManager(ctx); err != nil {
		return err
	}
	// Next to the other logs: a link while it runs, a copy once the control plane's own directory
	// goes away on stop.
	capiLog := filepath.Join(f.State.LogDir, "capi-manager.log")
	_ = os.Symlink(f.capi.LogPath, capiLog)
	f.stops = append(f.stops, func() {
		_ = os.Remove(capiLog)
		_ = copyFile(f.capi.LogPath, capiLog)
	})

	return nil
}

// Stop ends every component, children first, and removes the state file. Logs stay.
func (f *Fleet) Stop() {
	_ = os.Remove(filepath.Join(f.stateDir, StateFileName))
	f.cancel()
	if f.mgrDone != nil {
		select {
		case err := <-f.mgrDone:
			if err != nil {
				f.log.Error(err, "manager stopped with an error")
			}
		case <-time.After(30 * time.Second):
			f.log.Info("manager did not stop within 30s")
		}
	}
	if f.Simulator != nil {
		// Kills every VM's agent and runner.
		_ = f.Simulator.Close()
	}
	if f.HyperV != nil {
		_ = f.HyperV.Close()
	}
	if f.VSphere != nil {
		f.VSphere.Close()
	}
	if f.GitHub != nil {
		f.GitHub.Close()
	}
	if f.GitLab != nil {
		f.GitLab.Close()
	}
	if f.Buildkite != nil {
		f.Buildkite.Close()
	}
	if f.capi != nil {
		f.capi.Stop()
	}
	for i := len(f.stops) - 1; i >= 0; i-- {
		f.stops[i]()
	}
	if f.Env != nil {
		if err := f.Env.Stop(); err != nil {
			f.log.Error(err, "stopping the control plane")
		}
	}
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("crypto/rand failed: " + err.Error()))
	}
	return hex.EncodeToString(b)
}
