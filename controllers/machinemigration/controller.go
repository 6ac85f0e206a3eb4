package machinemigration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/fresh"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

// Reconciler moves a persistent claim's VM to another host: it holds the claim
// (MigrationInProgressAnnotation, so the claim shows Migrating and its run strategy waits),
// chooses the target, starts the hypervisor's migration and follows its task, then records the
// VM's new host on the claim and hands it back. Deleting a MachineMigration mid-way cancels the
// task.
type Reconciler struct {
	Client client.Client
	// APIReader reads the migration itself past the cache: a reconcile that saw no task because
	// the cache lagged behind the one that started it would start the move again (and fail, the
	// VM having left its host already).
	APIReader client.Reader
	Recorder  record.EventRecorder
	Registry  *connection.Registry
	// Audit, when set, records each migration the controller starts (the audit log).
	Audit claimvm.Audit
	// PollInterval is how often a task is polled. Default 2s.
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinemigrations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinemigrations/status;machinemigrations/finalizers,verbs=get;update;patch

// Reconcile moves one migration one step on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	m := &fleetv1.MachineMigration{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("MachineClaim", m.Spec.MachineClaimName))
	if m.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, m, fleetv1.MachineMigrationFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(m, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, m, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition, fleetv1.ProgressingCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, m)
	}
	if m.Status.Phase == fleetv1.MachineMigrationPhaseSucceeded || m.Status.Phase == fleetv1.MachineMigrationPhaseFailed {
		return ctrl.Result{}, nil // a migration runs once
	}
	return r.reconcileMigration(ctx, m)
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 2 * time.Second
}

// setMigrationState sets the phase and the Ready and Progressing conditions.
func setMigrationState(m *fleetv1.MachineMigration, phase fleetv1.MachineMigrationPhase, reason, msg string) {
	m.Status.Phase = phase
	ready, progressing := metav1.ConditionFalse, metav1.ConditionTrue
	switch phase {
	case fleetv1.MachineMigrationPhaseSucceeded:
		ready, progressing = metav1.ConditionTrue, metav1.ConditionFalse
	case fleetv1.MachineMigrationPhaseFailed:
		progressing = metav1.ConditionFalse
	}
	conditions.Set(m, metav1.Condition{Type: fleetv1.ReadyCondition, Status: ready, Reason: reason, Message: msg, ObservedGeneration: m.Generation})
	conditions.Set(m, metav1.Condition{Type: fleetv1.ProgressingCondition, Status: progressing, Reason: reason, Message: msg, ObservedGeneration: m.Generation})
}

func (r *Reconciler) reconcileMigration(ctx context.Context, m *fleetv1.MachineMigration) (ctrl.Result, error) {
	vm, err := claimvm.ResolveProvider(ctx, r.Client, r.Registry, m.Namespace, m.Spec.MachineClaimName)
	var nr *claimvm.NotReady
	switch {
	case errors.As(err, &nr):
		if m.Status.Task != nil {
			// The task runs on; its outcome is read once the claim's hypervisor answers again.
			setMigrationState(m, fleetv1.MachineMigrationPhaseRunning, fleetv1.MigrationWaitingReason, nr.Message)
		} else {
			setMigrationState(m, fleetv1.MachineMigrationPhasePending, fleetv1.MigrationWaitingReason, nr.Message)
		}
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	claim := vm.Claim
	if err := claimvm.SetOwner(r.Client, m, claim); err != nil {
		return ctrl.Result{}, err
	}
	if m.Status.Task == nil {
		if msg := migrationRefusal(claim, m); msg != "" {
			return r.fail(ctx, m, fleetv1.MigrationForbiddenReason, msg)
		}
	}
	migrator, ok := hypervisor.As[hypervisor.Migrator](vm.Provider)
	if !ok {
		return r.fail(ctx, m, fleetv1.MigrationsUnsupportedReason, fmt.Sprintf("HypervisorCluster %s's provider cannot migrate VMs", vm.HC.Name))
	}
	if holder := claim.Annotations[infrav1.MigrationInProgressAnnotation]; holder != m.Name {
		if m.Status.StartTime != nil {
			// This migration held the claim and has let it go: this read is older than the status
			// that says it ended.
			return ctrl.Result{RequeueAfter: r.poll()}, nil
		}
		if holder != "" {
			setMigrationState(m, fleetv1.MachineMigrationPhasePending, fleetv1.MigrationWaitingReason, fmt.Sprintf("MachineMigration %s is moving the claim's VM", holder))
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		if restore := claim.Annotations[infrav1.RestoreInProgressAnnotation]; restore != "" {
			setMigrationState(m, fleetv1.MachineMigrationPhasePending, fleetv1.MigrationWaitingReason, fmt.Sprintf("MachineSnapshotRestore %s is restoring the claim's VM", restore))
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		// Only from a fresh read of this migration: a stale one, from before it ended and let the
		// claim go (a synchronous provider refuses a move at once), would hold the claim for ever.
		if stale, err := fresh.PatchStatus(ctx, r.Client, m, m.DeepCopy()); err != nil || stale {
			return ctrl.Result{RequeueAfter: time.Millisecond}, err
		}
		// Hold the claim first: its run strategy must not start or stop the VM mid-move.
		p := client.MergeFrom(claim.DeepCopy())
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[infrav1.MigrationInProgressAnnotation] = m.Name
		if err := r.Client.Patch(ctx, claim, p); err != nil {
			return ctrl.Result{}, err
		}
		setMigrationState(m, fleetv1.MachineMigrationPhaseScheduling, fleetv1.MigrationSchedulingReason, "holding the claim")
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if t := m.Status.Task; t != nil {
		return r.followTask(ctx, m, vm, t)
	}
	// A move starts only from a fresh read: a stale one, older than the task an earlier reconcile
	// recorded, would start the move again (or, once it is over, find the VM gone from its source
	// and fail a migration that succeeded).
	if stale, err := fresh.PatchStatus(ctx, r.Client, m, m.DeepCopy()); err != nil || stale {
		return ctrl.Result{RequeueAfter: time.Millisecond}, err
	}
	return r.startMigration(ctx, m, vm, migrator)
}

// migrationRefusal says why the claim's migrationPolicy forbids m, or "".
func migrationRefusal(claim *infrav1.MachineClaim, m *fleetv1.MachineMigration) string {
	if !claim.Spec.IsPersistent() {
		return fmt.Sprintf("MachineClaim %s is an Ephemeral runner: runners are drained, not migrated", claim.Name)
	}
	policy := claim.Spec.Migration()
	if policy.Strategy == infrav1.MigrationStrategyNone {
		return fmt.Sprintf("MachineClaim %s's migrationPolicy.strategy is None", claim.Name)
	}
	if m.Spec.WithLocalDisks && !policy.AllowLocalDisks {
		return fmt.Sprintf("withLocalDisks needs MachineClaim %s's migrationPolicy.allowLocalDisks", claim.Name)
	}
	return ""
}

// startMigration chooses the target and starts the hypervisor's migration task.
func (r *Reconciler) startMigration(ctx context.Context, m *fleetv1.MachineMigration, vm *claimvm.VM, migrator hypervisor.Migrator) (ctrl.Result, error) {
	state, err := vm.Provider.VM(ctx, vm.Ref())
	if err != nil {
		if !hypervisor.IsRetryable(err) {
			return r.fail(ctx, m, fleetv1.MigrationFailedReason, "reading the VM: "+err.Error())
		}
		setMigrationState(m, fleetv1.MachineMigrationPhaseScheduling, hypervisor.Reason(err), "reading the VM: "+err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if state.Lock != "" {
		setMigrationState(m, fleetv1.MachineMigrationPhaseScheduling, fleetv1.MigrationWaitingReason, fmt.Sprintf("VM %s is locked (%s)", state.Ref, state.Lock))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	m.Status.VMID, m.Status.SourceHost = vm.ID(), state.Ref.Node
	target := m.Spec.Target
	if target == fleetv1.MigrationTargetAny {
		target = ""
	}
	if slices.Contains(vm.HC.Spec.HostsInMaintenance(), target) {
		return r.fail(ctx, m, fleetv1.NoTargetHostReason, fmt.Sprintf("host %s is in maintenance (HypervisorCluster %s)", target, vm.HC.Name))
	}
	if target, err = chooseMigrationTarget(ctx, r.Client, vm, state.Ref.Node, target); err != nil {
		return r.fail(ctx, m, fleetv1.NoTargetHostReason, err.Error())
	}
	m.Status.TargetHost = target
	online := m.Spec.IsOnline() && state.State == hypervisor.PowerStateRunning
	task, err := migrator.Migrate(ctx, vm.Ref(), hypervisor.MigrateSpec{Target: target, Online: m.Spec.IsOnline(), WithLocalDisks: m.Spec.WithLocalDisks})
	if err != nil {
		if hypervisor.IsRetryable(err) {
			setMigrationState(m, fleetv1.MachineMigrationPhaseScheduling, hypervisor.Reason(err), "starting the migration: "+err.Error())
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return r.fail(ctx, m, fleetv1.MigrationFailedReason, err.Error())
	}
	now := metav1.Now()
	m.Status.Online, m.Status.StartTime = online, &now
	m.Status.Task = &fleetv1.MigrationTask{ID: string(task), Node: state.Ref.Node, StartTime: now}
	mode := "offline"
	if online {
		mode = "live"
	}
	msg := fmt.Sprintf("moving VM %s %s from %s to %s", state.Ref, mode, state.Ref.Node, target)
	setMigrationState(m, fleetv1.MachineMigrationPhaseRunning, fleetv1.MigrationRunningReason, msg)
	r.Recorder.Event(m, corev1.EventTypeNormal, fleetv1.MigrationRunningReason, msg)
	claimvm.Changed(r.Audit, vm, "migrate-vm", fmt.Sprintf("MachineMigration %s: %s", m.Name, msg))
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// chooseMigrationTarget checks the host a migration names, or with target "" picks one: by the
// claim's placement rules (host selector, affinity, anti-affinity, memory; ChooseHost), among the
// hosts the hypervisor would move the VM to (when it can say) and the HypervisorCluster's
// allowedNodes, never the source or a host in maintenance. A named host that is the source or
// that the hypervisor does not list is left to the hypervisor to refuse in its own words.
func chooseMigrationTarget(ctx context.Context, c client.Client, vm *claimvm.VM, source, target string) (string, error) {
	nodes, err := vm.Provider.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("listing hosts: %w", err)
	}
	if target != "" && (target == source || !slices.ContainsFunc(nodes, func(n hypervisor.Node) bool { return n.Name == target })) {
		return target, nil
	}
	var hypervisorAllows []string
	if checker, ok := hypervisor.As[hypervisor.MigrationChecker](vm.Provider); ok && target == "" {
		mg, err := checker.CheckMigration(ctx, vm.Ref())
		if err != nil {
			return "", fmt.Errorf("asking where VM %s can go: %w", vm.Ref(), err)
		}
		hypervisorAllows = mg.AllowedHosts
	}
	policy, err := claimplacement.Policy(vm.Claim, claimplacement.MemoryMiB(vm.Claim))
	if err != nil {
		return "", err
	}
	claims, err := claimplacement.ClusterClaims(ctx, c, vm.Claim.Namespace, vm.HC.Name)
	if err != nil {
		return "", err
	}
	lacking, err := claimplacement.PCIReasons(ctx, nil, vm.Provider, vm.Claim, nodes)
	if err != nil {
		return "", fmt.Errorf("listing PCI resource mappings: %w", err)
	}
	var hosts []placement.Host
	for _, h := range claimplacement.Hosts(vm.HC, nodes, claimplacement.ReservedBy(claims, vm.Claim.UID)) {
		switch {
		case target != "" && h.Name != target:
			continue
		case h.Unavailable != "":
		case h.Name == source:
			h.Unavailable = "the VM's own host"
		case lacking[h.Name] != "":
			h.Unavailable = lacking[h.Name]
		case hypervisorAllows != nil && !slices.Contains(hypervisorAllows, h.Name):
			h.Unavailable = "the hypervisor cannot move the VM there (its storage or local devices)"
		}
		hosts = append(hosts, h)
	}
	chosen, err := placement.ChooseHost(hosts, claimplacement.PlacedVMs(claims), vm.Claim.Name, policy)
	if err != nil {
		return "", fmt.Errorf("VM %s: %w", vm.Ref(), err)
	}
	return chosen, nil
}

// followTask polls the migration task; once it ends well the claim learns its VM's new host.
func (r *Reconciler) followTask(ctx context.Context, m *fleetv1.MachineMigration, vm *claimvm.VM, t *fleetv1.MigrationTask) (ctrl.Result, error) {
	st, err := vm.Provider.TaskStatus(ctx, t.Node, hypervisor.TaskID(t.ID))
	switch {
	case err != nil:
		setMigrationState(m, fleetv1.MachineMigrationPhaseRunning, hypervisor.Reason(err), "polling the migration task: "+err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case !st.Done:
		if st.Progress != nil {
			m.Status.Progress = ptr.To(int32(*st.Progress))
		}
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case st.Err != nil:
		m.Status.Task = nil
		return r.fail(ctx, m, fleetv1.MigrationFailedReason, st.Err.Error())
	}
	if m.Status.Progress != nil {
		m.Status.Progress = ptr.To(int32(100))
	}
	if err := r.recordHost(ctx, vm.Claim, m.Status.TargetHost); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseClaim(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	m.Status.Task = nil
	m.Status.EndTime = &metav1.Time{Time: time.Now()}
	msg := fmt.Sprintf("VM %s moved from %s to %s", m.Status.VMID, m.Status.SourceHost, m.Status.TargetHost)
	setMigrationState(m, fleetv1.MachineMigrationPhaseSucceeded, fleetv1.MigrationSucceededReason, msg)
	r.Recorder.Event(m, corev1.EventTypeNormal, fleetv1.MigrationSucceededReason, msg)
	return ctrl.Result{}, nil
}

// recordHost writes the VM's new host into the claim's status.
func (r *Reconciler) recordHost(ctx context.Context, claim *infrav1.MachineClaim, host string) error {
	fresh := &infrav1.MachineClaim{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if fresh.Status.Node == host {
		return nil
	}
	p := client.MergeFrom(fresh.DeepCopy())
	fresh.Status.Node = host
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, fresh, p))
}

func (r *Reconciler) fail(ctx context.Context, m *fleetv1.MachineMigration, reason, msg string) (ctrl.Result, error) {
	if err := r.releaseClaim(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	m.Status.Error = msg
	m.Status.EndTime = &metav1.Time{Time: time.Now()}
	setMigrationState(m, fleetv1.MachineMigrationPhaseFailed, reason, msg)
	r.Recorder.Event(m, corev1.EventTypeWarning, reason, msg)
	return ctrl.Result{}, nil
}

// reconcileDelete cancels a running migration task and waits for it to end, records where the
// VM ended up, and hands the claim back.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *fleetv1.MachineMigration) (ctrl.Result, error) {
	if t := m.Status.Task; t != nil {
		vm, err := claimvm.ResolveProvider(ctx, r.Client, r.Registry, m.Namespace, m.Spec.MachineClaimName)
		var nr *claimvm.NotReady
		switch {
		case errors.As(err, &nr):
			if vm != nil && vm.HCGone || nr.Reason == fleetv1.SourceNotFoundReason {
				break // nothing left to cancel against
			}
			setMigrationState(m, fleetv1.MachineMigrationPhaseRunning, fleetv1.MigrationCancellingReason, "cannot cancel yet: "+nr.Message)
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		case err != nil:
			return ctrl.Result{}, err
		default:
			st, err := vm.Provider.TaskStatus(ctx, t.Node, hypervisor.TaskID(t.ID))
			if err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
				return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
			}
			if err == nil && !st.Done {
				if migrator, ok := hypervisor.As[hypervisor.Migrator](vm.Provider); ok {
					if err := migrator.CancelTask(ctx, t.Node, hypervisor.TaskID(t.ID)); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
						ctrl.LoggerFrom(ctx).Info("cancelling the migration task failed", "task", t.ID, "error", err.Error())
					}
				}
				setMigrationState(m, fleetv1.MachineMigrationPhaseRunning, fleetv1.MigrationCancellingReason, "stopping migration task "+t.ID)
				return ctrl.Result{RequeueAfter: r.poll()}, nil
			}
			if err == nil && st.Err == nil {
				// It finished before it could be stopped: the VM is on the target.
				if err := r.recordHost(ctx, vm.Claim, m.Status.TargetHost); err != nil {
					return ctrl.Result{}, err
				}
			}
		}
		m.Status.Task = nil
	}
	if err := r.releaseClaim(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(m, fleetv1.MachineMigrationFinalizer)
	return ctrl.Result{}, nil
}

// releaseClaim hands the claim back to its run strategy if this migration holds it, with a JSON
// patch that tests the annotation's value first.
func (r *Reconciler) releaseClaim(ctx context.Context, m *fleetv1.MachineMigration) error {
	_, err := claimvm.RemoveAnnotation(ctx, r.Client, m.Namespace, m.Spec.MachineClaimName, infrav1.MigrationInProgressAnnotation, m.Name)
	return err
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.MachineMigration{}).
		WithOptions(opts).
		Complete(tracing.Reconciler("machinemigration", r))
}
