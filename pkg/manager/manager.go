package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperfleet-io/hyperfleet/api"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/controllers/runnerpool"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all" // registers every CI platform
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
)

// New builds a manager with every HyperFleet controller registered.
func New(ctx context.Context, restConfig *rest.Config, cfg *config.Manager, override ...func(*controllers.Options)) (manager.Manager, error) {
	syncPeriod := cfg.SyncPeriod
	// Nothing reads managedFields, and they are much of each object: every List from the cache
	// deep-copied them (about a tenth of the manager's CPU in a 1,000-job burst), and every cached
	// object kept them in memory. An update or patch without managedFields leaves the server's.
	cacheOpts := cache.Options{SyncPeriod: &syncPeriod, DefaultTransform: cache.TransformStripManagedFields()}
	wakeups := make(chan event.TypedGenericEvent[*fleetv1.RunnerPool], 1024)
	if cfg.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{cfg.WatchNamespace: {}}
	}
	// The metrics and health probe listeners are the manager's own (listeners.go), with limits
	// controller-runtime's servers do not offer; its own are off.
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        api.NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              pprofAddress(cfg.PprofBindAddress),
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              cfg.LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		// Job ledgers (ConfigMaps) are read-modify-written by several replicas under optimistic
		// concurrency; reading them from a cache would only produce conflicts. Secrets are read
		// uncached, one by name where an object references it: the manager may read Secrets only
		// in namespaces enabled for HyperFleet and must not hold the cluster's Secrets in memory.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	// The controllers read the settings as parsed: a copy, so that overrides cannot change cfg.
	opts := controllers.Options{Manager: *cfg, PoolWakeups: wakeups, JobClaimNamespace: jobClaimNamespace(cfg)}
	for _, o := range override {
		o(&opts)
	}
	if opts.Platforms == nil {
		// Every platform registered by pkg/platform/all, each pool dispatched by spec.platform.
		src, err := platform.NewSource(platform.Inputs{Reader: mgr.GetClient(), Transport: opts.PlatformTransport})
		if err != nil {
			return nil, err
		}
		opts.Platforms = src
	}
	// The one CI platform seam of the manager, instrumented here once: the controllers and the
	// webhook receiver share it (and its client cache).
	opts.Platforms = pinstrumented.Source(opts.Platforms)
	if err := addHistory(mgr, cfg, &opts); err != nil {
		return nil, err
	}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if err := addWebhookReceiver(mgr, cfg, opts, wakeups); err != nil {
		return nil, err
	}
	if err := addDemandPollers(mgr, opts, wakeups); err != nil {
		return nil, err
	}
	// Last, so that nothing after them fails and leaves their ports bound.
	if err := addMetricsServer(mgr, cfg); err != nil {
		return nil, err
	}
	if err := addHealthProbeServer(mgr, cfg); err != nil {
		return nil, err
	}
	return mgr, nil
}

// pprofAddress is controller-runtime's setting for cfg's: "0" or empty turns profiles off.
func pprofAddress(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// addWebhookReceiver serves the CI platforms' job webhooks, one route per platform with its own
// secret, on every replica (no leader election: the job ledger in the API server arbitrates) and
// wakes the RunnerPool whose demand changed.
func addWebhookReceiver(mgr manager.Manager, cfg *config.Manager, opts controllers.Options, wakeups chan event.TypedGenericEvent[*fleetv1.RunnerPool]) error {
	if cfg.WebhookBindAddress == "0" || cfg.WebhookBindAddress == "" {
		return nil
	}
	secrets := map[platform.Kind][]byte{}
	var envs []string
	for _, d := range platform.Drivers() {
		envs = append(envs, d.WebhookSecret.Env)
		if s := cfg.WebhookSecrets[d.Kind]; s != "" {
			secrets[d.Kind] = []byte(s)
		}
	}
	if len(secrets) == 0 {
		ctrl.Log.WithName("setup").Info("No webhook secret is set (" + strings.Join(envs, ", ") + "): the webhook receiver is off and demand comes from the repair loop only")
		return nil
	}
	notify := wakeUp(wakeups)
	ledgers := demand.NewStore(mgr.GetClient())
	ledgers.Jobs = opts.JobHistory
	receiver := webhook.NewReceiver(mgr.GetClient(), ledgers, webhook.Config{
		Secrets: secrets, Namespace: cfg.WatchNamespace,
		Installations: opts.Platforms,
		Claims:        &demand.Claims{Client: mgr.GetClient(), Namespace: opts.JobClaimNamespace},
	}, notify)
	return mgr.Add(&webhookServer{receiver: receiver, addr: cfg.WebhookBindAddress})
}

type webhookServer struct {
	receiver *webhook.Receiver
	addr     string
}

func (w *webhookServer) Start(ctx context.Context) error {
	return w.receiver.ListenAndServe(ctx, w.addr)
}

// NeedLeaderElection is false: every replica receives deliveries.
func (w *webhookServer) NeedLeaderElection() bool { return false }

// Run builds the manager and runs it until ctx ends.
func Run(ctx context.Context, restConfig *rest.Config, cfg *config.Manager) error {
	mgr, err := New(ctx, restConfig, cfg)
	if err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("starting manager", "metrics", cfg.MetricsBindAddress, "health", cfg.HealthProbeBindAddress,
		"leaderElection", cfg.LeaderElect, "namespace", cfg.WatchNamespace, "watchFilter", cfg.WatchFilter)
	return mgr.Start(ctx)
}

// cacheSynced reports ready only once the informers have synced, so a new replica takes no traffic
// while it would act on an empty cache.
func cacheSynced(mgr manager.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}

// jobClaimNamespace is where job claims live: the manager's own namespace, which tenants cannot
// write (the namespace of its identity CA Secret, or the pod's), or the one namespace it watches.
func jobClaimNamespace(cfg *config.Manager) string {
	if cfg.WatchNamespace != "" {
		return cfg.WatchNamespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if ns, _, ok := strings.Cut(cfg.BootstrapCASecret, "/"); ok && ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

// wakeUp returns a function that triggers a RunnerPool reconcile without blocking.
func wakeUp(wakeups chan event.TypedGenericEvent[*fleetv1.RunnerPool]) func(types.NamespacedName) {
	return func(pool types.NamespacedName) {
		select {
		case wakeups <- event.TypedGenericEvent[*fleetv1.RunnerPool]{Object: &fleetv1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name}}}:
		default: // a wake-up is already pending; the pool reconciles on the ledger watch anyway
		}
	}
}

// addDemandPollers runs, on the leader only, the pollers of every platform that has them: the
// demand of pools that get no webhook (GitHub's spec.platform.github.demand Polling or Both)
// comes from polling the platform's API, one poller per installation and scope.
func addDemandPollers(mgr manager.Manager, opts controllers.Options, wakeups chan event.TypedGenericEvent[*fleetv1.RunnerPool]) error {
	ledgers := demand.NewStore(mgr.GetClient())
	ledgers.Jobs = opts.JobHistory
	feed := &runnerpool.PolledDemand{Client: mgr.GetClient(), Demand: ledgers, Notify: wakeUp(wakeups)}
	if opts.JobClaimNamespace != "" {
		feed.Claims = &demand.Claims{Client: mgr.GetClient(), Namespace: opts.JobClaimNamespace}
	}
	for _, kind := range platform.Registered() {
		d, _ := platform.Lookup(kind)
		if d.NewPollers == nil {
			continue
		}
		p, err := d.NewPollers(platform.Inputs{Reader: mgr.GetClient(), Transport: opts.PlatformTransport}, feed.Feed)
		if err != nil {
			return fmt.Errorf("%s pollers: %w", kind, err)
		}
		// A RunnableFunc needs leader election: only the leader polls.
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return p.Start(ctrl.LoggerInto(ctx, ctrl.Log.WithName("poll").WithValues("platform", kind)))
		})); err != nil {
			return err
		}
	}
	return nil
}
