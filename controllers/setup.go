package controllers

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/bootstrapconfig"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/controllers/fleetcontrolplane"
	"github.com/hyperfleet-io/hyperfleet/controllers/hostdrain"
	"github.com/hyperfleet-io/hyperfleet/controllers/hypervisorcluster"
	"github.com/hyperfleet-io/hyperfleet/controllers/machineclaim"
	"github.com/hyperfleet-io/hyperfleet/controllers/machineclaimtemplate"
	"github.com/hyperfleet-io/hyperfleet/controllers/runnerpool"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	hvinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/instrumented"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/providers"
)

// Options are what Setup builds the controllers from: the manager's validated settings, embedded
// as they are parsed, and the wiring and test knobs that are not settings.
type Options struct {
	// Manager is the manager's configuration; each setting is declared, defaulted and validated
	// there once and read here as it is.
	config.Manager
	// SPIRESelectors are what a VM's workload must match to get its machine SVID ("type:value");
	// spire.DefaultSelector (the agent running as root) when empty.
	SPIRESelectors []string
	// JobClaimNamespace holds the job claims that give each job one pool cluster-wide (the
	// manager's own namespace); empty turns claims off.
	JobClaimNamespace string
	// Platforms gives each RunnerPool its CI platform client: the one platform.Source of the
	// process, instrumented once by whoever assembles it (pkg/manager); nil turns the repair loop
	// and runner deregistration off.
	Platforms platform.Source
	// PlatformTransport is the base HTTP transport of CI platform clients (e.g. to trust a private CA),
	// used by pkg/manager when it builds Platforms.
	PlatformTransport http.RoundTripper
	// PoolWakeups lets the webhook receiver trigger a RunnerPool reconcile when demand changes.
	PoolWakeups <-chan event.TypedGenericEvent[*fleetv1.RunnerPool]
	// History, when set, hears of VM lifecycle moments (job records, the audit log), and
	// JobHistory of the job events the ledgers apply (pkg/manager's history recorder).
	History    machineclaim.History
	JobHistory demand.JobObserver
	// HistoryHealth says whether job records reach the store (RunnerPools' HistoryRecorded).
	HistoryHealth runnerpool.HistoryHealth
	// Pace is how often the controllers poll and look again; its zero value is production's.
	Pace Pace
	// Testing holds what only tests set.
	Testing TestHooks
}

// Pace is how often the controllers poll the hypervisor and look again. Each zero field is
// production's default; the local fleet and the tests go faster so that a person or a test does not
// wait on production's pace.
type Pace struct {
	// TaskPollInterval is how often in-flight hypervisor tasks are polled. Default 2s.
	TaskPollInterval time.Duration
	// TaskDeadline is how long a deleting MachineClaim waits for one hypervisor task before acting
	// anew. Default machineclaim.DefaultTaskDeadline.
	TaskDeadline time.Duration
	// ProviderTaskPollInterval is how often a hypervisor client polls a task it waits for itself;
	// zero keeps each provider's default.
	ProviderTaskPollInterval time.Duration
	// CapacityRecheck is how long a MachineClaim waiting for capacity waits for a wake-up before
	// it looks for room by itself. Default machineclaim.DefaultCapacityRecheck.
	CapacityRecheck time.Duration
	// TemplateCheckInterval is how often MachineClaimTemplates are re-checked. Default 1m.
	TemplateCheckInterval time.Duration
}

// TestHooks are what tests change in the controllers and nothing else does.
type TestHooks struct {
	// Providers adds or replaces hypervisor provider builders, keyed by spec.provider, on top of
	// pkg/providers' list (a fake provider).
	Providers map[infrav1.ProviderType]connection.ProviderBuilder
	// RunnerName names a pool's new runner (Machine, MachineClaim and BootstrapConfig); nil
	// appends a random suffix to the pool's name.
	RunnerName func(pool string) string
	// SkipNameValidation allows several managers in one process (tests that restart the manager).
	SkipNameValidation bool
	// Clock tells snapshot schedules the time; nil is the real clock.
	Clock clock.PassiveClock
}

// Setup registers every controller with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	registry := connection.NewRegistry(mgr.GetClient(), opts.ProviderTimeout, providers.Builders())
	registry.TaskPollInterval = opts.Pace.ProviderTaskPollInterval
	for kind, b := range opts.Testing.Providers {
		registry.Register(kind, b)
	}
	// Every hypervisor call gets a span and latency/error metrics.
	registry.Wrap = hvinstrumented.Wrap
	copts := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if opts.Testing.SkipNameValidation {
		copts.SkipNameValidation = &opts.Testing.SkipNameValidation
	}
	clusters := clusterruntime.New(mgr.GetClient(), registry)
	hc := &hypervisorcluster.Reconciler{
		Clusters:        clusters,
		Client:          mgr.GetClient(),
		Recorder:        mgr.GetEventRecorderFor("hypervisorcluster-controller"),
		Registry:        registry,
		WatchFilter:     opts.WatchFilter,
		DefaultInterval: opts.SweepInterval,
		Sweeper: &hypervisorcluster.Sweeper{
			Client:      mgr.GetClient(),
			Recorder:    mgr.GetEventRecorderFor("hypervisorcluster-sweeper"),
			OrphanGrace: opts.OrphanGracePeriod,
			Clusters:    clusters,
		},
	}
	if err := hc.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	drains := &hostdrain.Reconciler{
		Clusters:    clusters,
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorderFor("hostdrain-controller"),
		Registry:    registry,
		WatchFilter: opts.WatchFilter,
	}
	if err := drains.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	claims := &machineclaim.Reconciler{
		Clusters:     clusters,
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorderFor("machineclaim-controller"),
		History:      opts.History,
		Registry:     registry,
		WatchFilter:  opts.WatchFilter,
		PollInterval: opts.Pace.TaskPollInterval,
		TaskDeadline: opts.Pace.TaskDeadline,
		// Waiting claims are woken when capacity frees; this is only their fallback.
		CapacityRecheck: opts.Pace.CapacityRecheck,
	}
	if err := claims.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	if err := setupVMControllers(mgr, registry, opts, copts); err != nil {
		return err
	}
	templates := &machineclaimtemplate.Reconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorderFor("machineclaimtemplate-controller"),
		Registry:    registry,
		WatchFilter: opts.WatchFilter,
		Interval:    opts.Pace.TemplateCheckInterval,
	}
	if err := templates.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}

	td, err := spiffeid.TrustDomainFromString(opts.TrustDomain)
	if err != nil {
		return fmt.Errorf("trust domain %q: %w", opts.TrustDomain, err)
	}
	caNS, caName, _ := strings.Cut(opts.BootstrapCASecret, "/")
	spireServers := &spire.Provisioners{Config: spire.Config{Selectors: opts.SPIRESelectors,
		Dial: spire.DialOptions{WorkloadAPIAddress: opts.SPIREWorkloadAPIAddress}}}
	bootstrap := &bootstrapconfig.Reconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorderFor("bootstrapconfig-controller"),
		WatchFilter:             opts.WatchFilter,
		Provisioner:             builtin.NewProvisioner(mgr.GetClient(), types.NamespacedName{Namespace: caNS, Name: caName}, td),
		SPIREProvisioner:        spireServers.For,
		SPIREServerAddress:      opts.SPIREAdminAddress,
		SPIREAgentServerAddress: opts.SPIREAgentServerAddress,
		SPIREServiceURL:         opts.SPIREBootstrapServiceURL,
		ServiceURL:              opts.BootstrapServiceURL,
		TrustDomain:             opts.TrustDomain,
	}
	if err := bootstrap.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return spireServers.Close()
	})); err != nil {
		return err
	}

	saNS, saName, _ := strings.Cut(opts.WorkloadReaderServiceAccount, "/")
	restConfig := mgr.GetConfig()
	caData := restConfig.CAData
	if len(caData) == 0 && restConfig.CAFile != "" {
		if caData, err = os.ReadFile(restConfig.CAFile); err != nil {
			return fmt.Errorf("reading the API server CA: %w", err)
		}
	}
	controlPlanes := &fleetcontrolplane.Reconciler{
		Client:         mgr.GetClient(),
		WatchFilter:    opts.WatchFilter,
		Server:         restConfig.Host,
		CAData:         caData,
		ServiceAccount: types.NamespacedName{Namespace: saNS, Name: saName},
	}
	if err := controlPlanes.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}

	poolDemand := demand.NewStore(mgr.GetClient())
	poolDemand.Jobs = opts.JobHistory
	pools := &runnerpool.Reconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Recorder:       mgr.GetEventRecorderFor("runnerpool-controller"),
		Demand:         poolDemand,
		History:        opts.HistoryHealth,
		Claims:         jobClaims(mgr, opts),
		Platforms:      opts.Platforms,
		WatchFilter:    opts.WatchFilter,
		RepairInterval: opts.RepairInterval,
		Wakeups:        opts.PoolWakeups,
		RunnerName:     opts.Testing.RunnerName,
	}
	return pools.SetupWithManager(ctx, mgr, copts)
}

func jobClaims(mgr ctrl.Manager, opts Options) *demand.Claims {
	if opts.JobClaimNamespace == "" {
		return nil
	}
	return &demand.Claims{Client: mgr.GetClient(), Namespace: opts.JobClaimNamespace}
}
