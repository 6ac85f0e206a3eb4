package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// New builds a manager with every HyperFleet controller registered.
func New(ctx context.Context, restConfig *rest.Config, cfg *config.Manager, override ...func(*controllers.Options)) (manager.Manager, error) {
	metrics := metricsserver.Options{BindAddress: cfg.MetricsBindAddress, SecureServing: cfg.MetricsSecure}
	if cfg.MetricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	syncPeriod := cfg.SyncPeriod
	cacheOpts := cache.Options{SyncPeriod: &syncPeriod}
	if cfg.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{cfg.WatchNamespace: {}}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        api.NewScheme(),
		Metrics:                       metrics,
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              cfg.LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr)); err != nil {
		return nil, err
	}
	opts := controllers.Options{
		Concurrency:                  cfg.Concurrency,
		WatchFilter:                  cfg.WatchFilter,
		SweepInterval:                cfg.SweepInterval,
		OrphanGracePeriod:            cfg.OrphanGracePeriod,
		ProviderTimeout:              cfg.ProviderTimeout,
		BootstrapServiceURL:          cfg.BootstrapServiceURL,
		BootstrapCASecret:            cfg.BootstrapCASecret,
		TrustDomain:                  cfg.TrustDomain,
		RepairInterval:               cfg.RepairInterval,
		WorkloadReaderServiceAccount: cfg.WorkloadReaderServiceAccount,
	}
	for _, o := range override {
		o(&opts)
	}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

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
