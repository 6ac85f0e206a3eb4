package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/hyperfleet-io/hyperfleet/controllers/machinemigration"
	"github.com/hyperfleet-io/hyperfleet/controllers/machinesnapshot"
	"github.com/hyperfleet-io/hyperfleet/controllers/machinesnapshotrestore"
	"github.com/hyperfleet-io/hyperfleet/controllers/machinesnapshotschedule"
	"github.com/hyperfleet-io/hyperfleet/controllers/vmnetwork"
	"github.com/hyperfleet-io/hyperfleet/controllers/vmpool"
	"github.com/hyperfleet-io/hyperfleet/controllers/vmstorage"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
)

// setupVMControllers registers the controllers of long-lived VMs' request objects: snapshots,
// restores, snapshot schedules and migrations, of VM pools, and of the networks and storages VMs use.
func setupVMControllers(mgr ctrl.Manager, registry *connection.Registry, opts Options, copts controller.Options) error {
	snapshots := &machinesnapshot.Reconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorderFor("machinesnapshot-controller"),
		Registry:     registry,
		Audit:        opts.History, // a nil History converts to a nil Audit
		PollInterval: opts.Pace.TaskPollInterval,
	}
	if err := snapshots.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	restores := &machinesnapshotrestore.Reconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorderFor("machinesnapshotrestore-controller"),
		Registry:     registry,
		Audit:        opts.History,
		PollInterval: opts.Pace.TaskPollInterval,
	}
	if err := restores.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	migrations := &machinemigration.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorderFor("machinemigration-controller"),
		Registry:     registry,
		Audit:        opts.History,
		PollInterval: opts.Pace.TaskPollInterval,
	}
	if err := migrations.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	if err := (&vmpool.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("vmpool-controller")}).SetupWithManager(mgr, copts); err != nil {
		return err
	}
	networks := &vmnetwork.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("vmnetwork-controller"),
		Registry: registry,
	}
	if err := networks.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	ipam := &vmnetwork.IPAMReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor("vmnetwork-ipam"),
	}
	if err := ipam.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	storages := &vmstorage.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("vmstorage-controller"),
		Registry: registry,
	}
	if err := storages.SetupWithManager(mgr, copts); err != nil {
		return err
	}
	schedules := &machinesnapshotschedule.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("machinesnapshotschedule-controller"),
		Clock:    opts.Testing.Clock,
	}
	return schedules.SetupWithManager(mgr, copts)
}
