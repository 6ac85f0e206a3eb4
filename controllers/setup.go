package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
)

// Options are the settings controllers share.
type Options struct {
	Concurrency       int
	WatchFilter       string
	SweepInterval     time.Duration
	OrphanGracePeriod time.Duration
	ProviderTimeout   time.Duration
	// TaskPollInterval is how often in-flight hypervisor tasks are polled. Default 2s.
	TaskPollInterval time.Duration
	// Builder overrides how hypervisor clients are built (tests inject HTTP clients this way).
	Builder connection.Builder
	// TemplateCheckInterval is how often MachineClaimTemplates are re-checked. Default 1m.
	TemplateCheckInterval time.Duration
	// SkipNameValidation allows several managers in one process, as tests that restart the manager need.
	SkipNameValidation bool
}

// Setup registers every controller with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	registry := connection.NewRegistry(mgr.GetClient(), opts.ProviderTimeout)
	if opts.Builder != nil {
		registry.Build = opts.Builder
	}
	copts := controller.Options{MaxConcurrentReconciles: max(opts.Concurrency, 1)}
	if opts.SkipNameValidation {
		copts.SkipNameValidation = &opts.SkipNameValidation
	}
	hc := &HypervisorClusterReconciler{
		Client:          mgr.GetClient(),
		Recorder:        mgr.GetEventRecorderFor("hypervisorcluster-controller"),
		Registry:        registry,
		WatchFilter:     opts.WatchFilter,
		DefaultInterval: opts.SweepInterval,
		Sweeper: &Sweeper{
			Client:      mgr.GetClient(),
			Recorder:    mgr.GetEventRecorderFor("hypervisorcluster-sweeper"),
			OrphanGrace: opts.OrphanGracePeriod,
		},
	}
	if err := hc.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	claims := &MachineClaimReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorderFor("machineclaim-controller"),
		Registry:     registry,
		WatchFilter:  opts.WatchFilter,
		PollInterval: opts.TaskPollInterval,
	}
	if err := claims.SetupWithManager(ctx, mgr, copts); err != nil {
		return err
	}
	templates := &MachineClaimTemplateReconciler{
		Client:      mgr.GetClient(),
		Recorder:    mgr.GetEventRecorderFor("machineclaimtemplate-controller"),
		Registry:    registry,
		WatchFilter: opts.WatchFilter,
		Interval:    opts.TemplateCheckInterval,
	}
	return templates.SetupWithManager(ctx, mgr, copts)
}
