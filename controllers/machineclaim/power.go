package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/controllers/requeue"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/lifecycle"
)

// Operations of persistent claims recorded in status.task.
const (
	opPowerOn  = "PowerOn"
	opPowerOff = "PowerOff"
)

// Hook names in status.hook.
const (
	hookPreStart = "PreStart"
	hookPreStop  = "PreStop"
)

// reconcilePersistent applies a provisioned persistent claim's run strategy. It acts on the power
// state the sweep recorded from its one listing, and reads the VM itself only before it acts, so a
// steady persistent VM costs no hypervisor call of its own.
func (r *Reconciler) reconcilePersistent(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if !c.Spec.IsPersistent() || c.Status.CompletedStep != infrav1.StepStarted || c.Status.Task != nil || !isProvisioned(c) {
		return ctrl.Result{}, nil
	}
	if res, err := r.applyRunStrategy(ctx, s); err != nil || !res.IsZero() {
		return res, err
	}
	return r.awaitGuestAddresses(ctx, s)
}

// awaitGuestAddresses reads the guest's addresses after HyperFleet started a persistent VM (its
// first boot, or a restart, which drops the previous boot's addresses), paced as during
// provisioning, until the guest agent reports them. A VM that has its addresses costs no call.
func (r *Reconciler) awaitGuestAddresses(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if len(c.Status.Addresses) > 0 || c.Status.Task != nil || c.Status.PendingStop != nil ||
		hypervisor.PowerState(c.Status.PowerState) != hypervisor.PowerStateRunning {
		return ctrl.Result{}, nil
	}
	for _, a := range []string{infrav1.RestoreInProgressAnnotation, infrav1.MigrationInProgressAnnotation} {
		if _, busy := c.Annotations[a]; busy {
			return ctrl.Result{}, nil
		}
	}
	if wait := r.polls.until(c.UID, addressPollKey, time.Time{}, 0, r.poll()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	addrs, err := s.provider.Addresses(ctx, claimvm.Ref(c))
	r.polls.read(c.UID, addressPollKey)
	if err != nil {
		return r.powerError(ctx, s, "reading the guest's addresses", err)
	}
	if len(addrs) == 0 {
		return ctrl.Result{RequeueAfter: r.polls.next(c.UID, addressPollKey, r.poll())}, nil
	}
	r.polls.done(c.UID)
	setAddresses(c, addrs)
	return ctrl.Result{}, nil
}

// applyRunStrategy starts or stops the VM as its run strategy and power requests say.
func (r *Reconciler) applyRunStrategy(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if _, restoring := c.Annotations[infrav1.RestoreInProgressAnnotation]; restoring {
		return ctrl.Result{}, nil // the restore hands the VM back when it is done
	}
	if _, migrating := c.Annotations[infrav1.MigrationInProgressAnnotation]; migrating {
		return ctrl.Result{}, nil // so does a migration, with the VM's new host
	}
	if c.Status.Hook != nil {
		if res, err := r.reconcileHook(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	if c.Status.PendingStop == nil && hypervisor.PowerState(c.Status.PowerState) == hypervisor.PowerStateRunning &&
		conditions.GetReason(c, infrav1.MachineClaimLiveMigratableCondition) == infrav1.MigratabilityUnknownReason {
		r.checkMigratable(ctx, s)
	}
	if c.Status.PendingStop != nil {
		vm, err := s.provider.VM(ctx, claimvm.Ref(c))
		if err != nil {
			return r.powerError(ctx, s, "reading the VM", err)
		}
		return r.reconcileGracefulStop(ctx, s, vm)
	}
	request := c.Annotations[infrav1.PowerRequestAnnotation]
	obs := lifecycle.Observation{State: hypervisor.PowerState(c.Status.PowerState), Cause: c.Status.LastStopCause, Request: request}
	d := lifecycle.Decide(c.Spec.RunStrategy, obs)
	if d.Action == lifecycle.None && request == "" && (obs.State != hypervisor.PowerStateStopped || c.Status.LastStopCause != "") {
		return ctrl.Result{}, nil
	}
	// About to act (or to learn why the VM stopped): the sweep's view may be a sweep old.
	vm, err := s.provider.VM(ctx, claimvm.Ref(c))
	if err != nil {
		return r.powerError(ctx, s, "reading the VM", err)
	}
	c.Status.FailureCount, c.Status.LastFailureTime = 0, nil
	if vm.Lock != "" {
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	r.observePower(ctx, s, vm)
	obs.State, obs.Cause = vm.State, c.Status.LastStopCause
	d = lifecycle.Decide(c.Spec.RunStrategy, obs)
	if request != "" {
		taken, err := r.takePowerRequest(ctx, s, request, d)
		if err != nil || !taken {
			// Someone changed the request since it was read: act on the new one.
			return ctrl.Result{RequeueAfter: time.Millisecond}, err
		}
	}
	switch d.Action {
	case lifecycle.Start:
		task, err := s.provider.Start(ctx, claimvm.Ref(c))
		if err != nil {
			return r.powerError(ctx, s, "starting the VM", err)
		}
		if request == "" {
			c.Status.RestartCount++
		}
		c.Status.LastStopCause = ""
		c.Status.Addresses = nil // the new boot's are read once the guest agent answers
		if c.Spec.Hooks != nil && c.Spec.Hooks.PreStart != nil {
			c.Status.Hook = &infrav1.HookStatus{Name: hookPreStart, StartTime: metav1.NowMicro()}
		}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.RestartingReason, "starting VM %s: %s", claimvm.Ref(c), d.Reason)
		r.history().VMChanged(c, "start-vm", d.Reason)
		return r.recordTask(s, opPowerOn, c.Status.Node, task)
	case lifecycle.Stop:
		r.beginGracefulStop(s, d.Reason)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{}, nil
}

// checkMigratable asks the hypervisor, once per start, whether the running VM could move live, and
// sets LiveMigratable with the reason that keeps it from moving.
func (r *Reconciler) checkMigratable(ctx context.Context, s *claimScope) {
	c := s.claim
	set := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(c, metav1.Condition{Type: infrav1.MachineClaimLiveMigratableCondition, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: c.Generation})
	}
	checker, ok := hypervisor.As[hypervisor.MigrationChecker](s.provider)
	if !ok {
		set(metav1.ConditionUnknown, infrav1.MigrationCheckFailedReason, "the provider cannot tell whether the VM can migrate")
		return
	}
	m, err := checker.CheckMigration(ctx, claimvm.Ref(c))
	if err == nil && len(s.hc.Spec.AllowedNodes) > 0 {
		m.AllowedHosts = slices.DeleteFunc(m.AllowedHosts, func(h string) bool { return !slices.Contains(s.hc.Spec.AllowedNodes, h) })
	}
	switch {
	case err != nil:
		set(metav1.ConditionUnknown, infrav1.MigrationCheckFailedReason, fmt.Sprintf("checking migration: %v", err))
	case !m.Running:
		set(metav1.ConditionFalse, infrav1.NotRunningReason, "a stopped VM is moved offline, not live")
	case len(m.LocalResources) > 0:
		set(metav1.ConditionFalse, infrav1.LocalResourcesReason, fmt.Sprintf("the VM uses host devices: %s", strings.Join(m.LocalResources, ", ")))
	case len(m.LocalDisks) > 0:
		set(metav1.ConditionFalse, infrav1.LocalDisksReason, fmt.Sprintf("disks on storage only %s has: %s", c.Status.Node, strings.Join(m.LocalDisks, ", ")))
	case len(m.AllowedHosts) == 0:
		set(metav1.ConditionFalse, infrav1.NoCapacityReason, "no other host can take the VM")
	default:
		set(metav1.ConditionTrue, infrav1.LiveMigratableReason, fmt.Sprintf("can move live to %s", strings.Join(m.AllowedHosts, ", ")))
	}
}

// observePower records a fresh read of the VM and, for a VM newly seen stopped, how it stopped.
func (r *Reconciler) observePower(ctx context.Context, s *claimScope, vm hypervisor.VM) {
	c := s.claim
	c.Status.PowerState = string(vm.State)
	switch vm.State {
	case hypervisor.PowerStateRunning:
		c.Status.LastStopCause = ""
	case hypervisor.PowerStateStopped:
		if c.Status.LastStopCause != "" {
			return
		}
		c.Status.LastStopCause = infrav1.StopCauseUnknown
		c.Status.LastStopTime = &metav1.Time{Time: time.Now()}
		if reporter, ok := hypervisor.As[hypervisor.StopReporter](s.provider); ok {
			rec, err := reporter.LastStop(ctx, vm.Ref)
			switch {
			case err != nil:
				ctrl.LoggerFrom(ctx).Info("could not tell how the VM stopped", "error", err.Error())
			case rec.Cause == hypervisor.StopByGuest:
				c.Status.LastStopCause = infrav1.StopCauseGuestShutdown
			case rec.Cause == hypervisor.StopByHypervisor:
				c.Status.LastStopCause = infrav1.StopCauseHypervisorStop
			}
		}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.VMStoppedReason, "VM %s stopped (%s)", vm.Ref, c.Status.LastStopCause)
	}
}

// takePowerRequest consumes the power request annotation: it is acted on once, like KubeVirt's
// start and stop subresources, and its outcome stays in status.lastPowerRequest. The annotation is
// removed before anything is done, and only while it still holds the request read: a request
// written meanwhile (a stop right after a start) is not lost to this one's removal, and is taken
// next. It reports false, having done nothing, when the request changed.
func (r *Reconciler) takePowerRequest(ctx context.Context, s *claimScope, request string, d lifecycle.Decision) (bool, error) {
	c := s.claim
	// The claim in memory keeps the annotation, so that the end-of-reconcile patch leaves it to this
	// guarded removal.
	if taken, err := claimvm.RemoveAnnotation(ctx, r.Client, c.Namespace, c.Name, infrav1.PowerRequestAnnotation, request); err != nil || !taken {
		return false, err
	}
	accepted := d.RequestAccepted && (request == infrav1.PowerRequestStart || request == infrav1.PowerRequestStop)
	c.Status.LastPowerRequest = &infrav1.PowerRequestRecord{Action: request, Time: metav1.Now(), Accepted: accepted}
	switch {
	case request != infrav1.PowerRequestStart && request != infrav1.PowerRequestStop:
		r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.PowerRequestRefusedReason,
			"power request %q is neither %s nor %s", request, infrav1.PowerRequestStart, infrav1.PowerRequestStop)
	case !accepted:
		r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.PowerRequestRefusedReason,
			"power request %s refused: runStrategy %s decides the power state (power requests need runStrategy Manual); %s",
			request, c.Spec.RunStrategy, d.Reason)
	}
	return true, nil
}

// beginGracefulStop starts a stop: the preStop hook (when there is one), a guest shutdown, and a
// power-off once the grace period is over.
func (r *Reconciler) beginGracefulStop(s *claimScope, why string) {
	c := s.claim
	c.Status.PendingStop = &infrav1.GracefulStopStatus{Stage: infrav1.StopStagePreStopHook, StartTime: metav1.NowMicro()}
	if c.Spec.Hooks != nil && c.Spec.Hooks.PreStop != nil {
		c.Status.Hook = &infrav1.HookStatus{Name: hookPreStop, StartTime: metav1.NowMicro()}
	}
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.StoppingReason, "stopping VM %s: %s", claimvm.Ref(c), why)
	r.history().VMChanged(c, "stop-vm", why)
}

// reconcileGracefulStop moves a stop on by one stage; vm is a read of this reconcile. The preStop
// hook has run (or failed) once status.hook is clear.
func (r *Reconciler) reconcileGracefulStop(ctx context.Context, s *claimScope, vm hypervisor.VM) (ctrl.Result, error) {
	c := s.claim
	ps := c.Status.PendingStop
	if vm.State == hypervisor.PowerStateStopped {
		c.Status.PendingStop = nil
		c.Status.PowerState = string(vm.State)
		c.Status.LastStopCause = infrav1.StopCauseRequested
		c.Status.LastStopTime = &metav1.Time{Time: time.Now()}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.VMStoppedReason, "VM %s stopped after %s", vm.Ref, ps.Stage)
		return ctrl.Result{}, nil
	}
	if c.Status.Hook != nil {
		return r.reconcileHook(ctx, s)
	}
	grace := c.Spec.TerminationGracePeriod()
	switch ps.Stage {
	case infrav1.StopStagePreStopHook:
		ps.Stage, ps.StartTime = infrav1.StopStageShutdown, metav1.NowMicro()
		if grace > 0 {
			if _, err := s.provider.Shutdown(ctx, vm.Ref); err != nil {
				// The power-off after the grace period still comes.
				r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.StoppingReason, "asking the guest to shut down failed: %v", err)
			}
		}
		return ctrl.Result{RequeueAfter: min(r.poll(), max(grace, time.Millisecond))}, nil
	case infrav1.StopStageShutdown:
		if left := grace - time.Since(ps.StartTime.Time); left > 0 {
			return ctrl.Result{RequeueAfter: min(r.poll(), left)}, nil
		}
		ps.Stage, ps.StartTime = infrav1.StopStagePowerOff, metav1.NowMicro()
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.StoppingReason,
			"VM %s still running %s after the shutdown request; powering it off", vm.Ref, grace)
	}
	task, err := s.provider.StopSeen(ctx, vm)
	if err != nil {
		return r.powerError(ctx, s, "powering the VM off", err)
	}
	return r.recordTask(s, opPowerOff, vm.Ref.Node, task)
}

// reconcileHook runs a lifecycle hook in the guest and follows it to its end. A hook that fails,
// times out or cannot run is reported with an Event and never blocks the power change.
func (r *Reconciler) reconcileHook(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	h := c.Status.Hook
	var hook *infrav1.LifecycleHook
	if c.Spec.Hooks != nil {
		hook = map[string]*infrav1.LifecycleHook{hookPreStart: c.Spec.Hooks.PreStart, hookPreStop: c.Spec.Hooks.PreStop}[h.Name]
	}
	if hook == nil {
		c.Status.Hook = nil
		return ctrl.Result{}, nil
	}
	timeout := time.Duration(max(hook.TimeoutSeconds, 1)) * time.Second
	if hook.TimeoutSeconds == 0 {
		timeout = 30 * time.Second
	}
	failed := func(format string, args ...any) (ctrl.Result, error) {
		c.Status.Hook = nil
		r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.HookFailedReason, "%s hook %v: %s", h.Name, hook.Command, fmt.Sprintf(format, args...))
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if time.Since(h.StartTime.Time) > timeout {
		return failed("did not finish within %s", timeout)
	}
	execer, ok := hypervisor.As[hypervisor.GuestExecer](s.provider)
	if !ok {
		return failed("the provider cannot run commands in a guest")
	}
	ref := claimvm.Ref(c)
	if h.PID == 0 {
		pid, err := execer.GuestExec(ctx, ref, hook.Command)
		switch {
		case errors.Is(err, hypervisor.ErrBusy) || errors.Is(err, hypervisor.ErrTransient):
			// The guest agent answers once the guest has booted.
			return ctrl.Result{RequeueAfter: min(r.poll(), time.Second)}, nil
		case err != nil:
			return failed("could not run: %v", err)
		}
		h.PID = pid
		return ctrl.Result{RequeueAfter: min(r.poll(), 500*time.Millisecond)}, nil
	}
	st, err := execer.GuestExecStatus(ctx, ref, h.PID)
	switch {
	case errors.Is(err, hypervisor.ErrTransient):
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case err != nil:
		return failed("lost track of pid %d: %v", h.PID, err)
	case !st.Exited:
		return ctrl.Result{RequeueAfter: min(r.poll(), 500*time.Millisecond)}, nil
	case st.ExitCode != 0 || st.Signal != 0:
		return failed("exited with code %d (signal %d): %s", st.ExitCode, st.Signal, st.Stderr)
	}
	c.Status.Hook = nil
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.HookSucceededEventReason, "%s hook %v finished", h.Name, hook.Command)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// powerError reports a failed power step on the claim and retries with backoff.
func (r *Reconciler) powerError(ctx context.Context, s *claimScope, what string, err error) (ctrl.Result, error) {
	c := s.claim
	if errors.Is(err, hypervisor.ErrNotFound) {
		conditions.Set(c, metav1.Condition{Type: infrav1.MachineClaimVMProvisionedCondition, Status: metav1.ConditionFalse,
			Reason: infrav1.VMNotFoundReason, Message: fmt.Sprintf("VM %s is gone; the persistent claim keeps its place until it is deleted", claimvm.Ref(c)),
			ObservedGeneration: c.Generation})
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	c.Status.FailureCount++
	c.Status.LastFailureTime = &metav1.Time{Time: time.Now()}
	delay := requeue.Backoff(c.Status.FailureCount)
	r.Recorder.Eventf(c, corev1.EventTypeWarning, infrav1.HypervisorErrorReason, "%s: %v (retrying in %s)", what, err, delay)
	ctrl.LoggerFrom(ctx).Info("power step failed", "step", what, "error", err.Error(), "retryIn", delay)
	return ctrl.Result{RequeueAfter: delay}, nil
}

func isProvisioned(c *infrav1.MachineClaim) bool {
	return ptr.Deref(ptr.Deref(c.Status.Initialization, infrav1.MachineClaimInitializationStatus{}).Provisioned, false)
}

// summarizePersistent sets a provisioned persistent claim's phase from its power state, Ready
// False while the VM is off, and LiveMigratable.
func summarizePersistent(c *infrav1.MachineClaim) {
	if !c.Spec.IsPersistent() || !c.DeletionTimestamp.IsZero() || !isProvisioned(c) ||
		c.Status.Phase == infrav1.MachineClaimPhaseFailed {
		return
	}
	setReady := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(c, metav1.Condition{Type: infrav1.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
	}
	migratable := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(c, metav1.Condition{Type: infrav1.MachineClaimLiveMigratableCondition, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: c.Generation})
	}
	switch hypervisor.PowerState(c.Status.PowerState) {
	case hypervisor.PowerStateRunning:
		c.Status.Phase = infrav1.MachineClaimPhaseRunning
		// A VM first started after being made off still says so; it runs now.
		firstRun := conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition) == infrav1.VMStoppedByRunStrategyReason
		if c.Status.Task == nil && c.Status.FailureCount == 0 && (firstRun || !conditions.IsTrue(c, infrav1.MachineClaimVMProvisionedCondition)) &&
			conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition) != infrav1.VMNotFoundReason {
			setVMCondition(c, metav1.ConditionTrue, infrav1.VMRunningReason, fmt.Sprintf("VM %s running", claimvm.Ref(c)))
			condition.Mirror(c, infrav1.MachineClaimVMProvisionedCondition, infrav1.ReadyCondition)
		}
		if c.Status.PendingStop != nil {
			setReady(metav1.ConditionFalse, infrav1.StoppingReason, fmt.Sprintf("stopping: %s", c.Status.PendingStop.Stage))
		}
		if !conditions.Has(c, infrav1.MachineClaimLiveMigratableCondition) || conditions.GetReason(c, infrav1.MachineClaimLiveMigratableCondition) == infrav1.NotRunningReason {
			migratable(metav1.ConditionUnknown, infrav1.MigratabilityUnknownReason, "the VM's disks and devices have not been checked for live migration yet")
		}
	case hypervisor.PowerStateStopped:
		c.Status.Phase = infrav1.MachineClaimPhaseStopped
		reason := infrav1.VMStoppedReason
		if c.Spec.RunStrategy == infrav1.RunStrategyHalted || c.Status.LastStopCause == infrav1.StopCauseRequested {
			reason = infrav1.VMStoppedByRunStrategyReason
		}
		setReady(metav1.ConditionFalse, reason, fmt.Sprintf("VM %s is off (%s; runStrategy %s)", claimvm.Ref(c), c.Status.LastStopCause, c.Spec.RunStrategy))
		migratable(metav1.ConditionFalse, infrav1.NotRunningReason, "a stopped VM is moved offline, not live")
	}
	if _, migrating := c.Annotations[infrav1.MigrationInProgressAnnotation]; migrating {
		c.Status.Phase = infrav1.MachineClaimPhaseMigrating
	}
}
