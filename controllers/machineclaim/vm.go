package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/requeue"
	"github.com/hyperfleet-io/hyperfleet/pkg/capacity"
	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/lifecycle"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// reconcileVM advances the VM's provisioning: never two tasks at once, and each completed step is
// recorded so a restarted controller continues where it stopped.
func (r *Reconciler) reconcileVM(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	if res, err := r.awaitThrottle(s); err != nil || !res.IsZero() {
		return res, err
	}
	if t := s.claim.Status.Task; t != nil && t.Operation != infrav1.TaskStart {
		follow := r.reconcileInFlightTask
		if t.Operation == infrav1.TaskClone && s.claim.Status.CompletedStep == "" {
			follow = r.reconcileCloneEnd
		}
		if res, err := follow(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
	}
	if wait := r.backoffRemaining(s.claim); wait > 0 {
		// Waiting out the backoff changes nothing: a claim that failed terminally stays Failed.
		s.terminal = s.claim.Status.Phase == infrav1.MachineClaimPhaseFailed
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if s.claim.Status.Task != nil {
		return r.reconcileStarting(ctx, s)
	}
	for {
		var (
			res ctrl.Result
			err error
		)
		before := s.claim.Status.CompletedStep
		switch before {
		case "":
			res, err = r.reconcileClone(ctx, s)
		case infrav1.StepCloned:
			res, err = r.reconcileConfigure(ctx, s)
		case infrav1.StepConfigured:
			if hold, res, err := r.reconcileWarm(ctx, s); hold || err != nil {
				return res, err
			}
			if c := s.claim; c.Spec.IsPersistent() && !lifecycle.StartsWhenMade(c.Spec.RunStrategy, c.Annotations[infrav1.PowerRequestAnnotation]) {
				r.provisionedOff(s)
				continue
			}
			res, err = r.reconcileStart(ctx, s)
		default:
			return r.reconcileRunning(ctx, s)
		}
		// Continue in the same reconcile while steps complete synchronously.
		if err != nil || !res.IsZero() || s.claim.Status.CompletedStep == before {
			return res, err
		}
	}
}

// reconcileInFlightTask polls the recorded task, paced by r.polls: not before a task of its kind
// typically ends, then backing off. It returns a zero result once the task is done and recorded;
// otherwise the caller waits.
func (r *Reconciler) reconcileInFlightTask(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	task := s.claim.Status.Task
	if wait := r.untilTaskRead(s.claim); wait > 0 {
		setVMCondition(s.claim, metav1.ConditionFalse, reasonFor(task.Operation),
			fmt.Sprintf("%s task %s running on %s", task.Operation, task.ID, task.Node))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return r.readInFlightTask(ctx, s)
}

// untilTaskRead is how long the claim waits before it reads its in-flight task (or, deleting, its
// VM) again.
func (r *Reconciler) untilTaskRead(c *infrav1.MachineClaim) time.Duration {
	task := c.Status.Task
	return r.polls.until(c.UID, task.ID, task.StartTime.Time, expectedTaskTime(task.Operation, c, r.poll()), r.poll())
}

// readInFlightTask reads the recorded task now.
func (r *Reconciler) readInFlightTask(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	task := s.claim.Status.Task
	state, err := s.provider.TaskStatus(ctx, task.Node, hypervisor.TaskID(task.ID))
	r.polls.read(s.claim.UID, task.ID)
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		// The hypervisor forgot the task (e.g. a node rebooted): look at the VM again instead.
		s.claim.Status.Task = nil
		r.polls.done(s.claim.UID)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case err != nil:
		return r.fail(ctx, s, fmt.Errorf("polling %s task: %w", task.Operation, err))
	case !state.Done:
		setVMCondition(s.claim, metav1.ConditionFalse, reasonFor(task.Operation),
			fmt.Sprintf("%s task %s running on %s", task.Operation, task.ID, task.Node))
		return ctrl.Result{RequeueAfter: r.polls.next(s.claim.UID, task.ID, r.poll())}, nil
	}
	s.claim.Status.Task = nil
	r.polls.done(s.claim.UID)
	if state.Err != nil {
		if task.Operation == infrav1.TaskClone {
			// Back in the queue for another clone: a runner's bootstrap timeout waits for it.
			s.claim.Status.CloneStartedTime = nil
		}
		if task.Operation == infrav1.TaskClone && s.provider.Capabilities().PreallocatedIDs {
			// PVE removes a failed clone's VM, so the VMID holds nothing of this claim's. It may
			// hold someone else's: a clone onto a VMID taken on another node is accepted and
			// fails in its task ("File exists"), and would fail again on every retry. Propose
			// another.
			s.claim.Status.VMID, s.claim.Status.Node = "", ""
		}
		return r.fail(ctx, s, fmt.Errorf("%s task failed: %w", task.Operation, state.Err))
	}
	r.operationDone(s, task.Operation, task.Node)
	return ctrl.Result{}, nil
}

// operationDone records a finished operation: its step is complete and the failures are over.
func (r *Reconciler) operationDone(s *claimScope, op, node string) {
	r.Recorder.Eventf(s.claim, corev1.EventTypeNormal, op+"Succeeded", "%s of VM %s on %s finished", op, s.claim.Status.VMID, node)
	switch op {
	case infrav1.TaskClone:
		s.claim.Status.CompletedStep = infrav1.StepCloned
		r.history().VMCloned(s.claim, s.hc)
	case infrav1.TaskConfigure:
		s.claim.Status.CompletedStep = infrav1.StepConfigured
	case infrav1.TaskStart:
		s.claim.Status.CompletedStep = infrav1.StepStarted
	}
	s.claim.Status.FailureCount, s.claim.Status.LastFailureTime = 0, nil
}

// reconcileClone reserves a node (and, where the caller chooses IDs, a VMID), persists them, then
// clones. Persisting first means a restart after the clone started finds the VM instead of cloning
// again: by its reserved ID, or, for a provider that assigns IDs, by the claim's ownership marks.
func (r *Reconciler) reconcileClone(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	preallocated := s.provider.Capabilities().PreallocatedIDs
	switch {
	case preallocated && c.Status.VMID == "", !preallocated && (c.Status.Node == "" || c.Status.SourceTemplate == nil):
		return r.placeClone(ctx, s)
	case !preallocated && c.Status.VMID != "":
		// Created, but the clone's end was not recorded: look at the VM.
		return r.adoptVM(ctx, s)
	case !preallocated:
		// An earlier attempt may have created the VM and lost the answer.
		vm, found, err := r.findOwnVM(ctx, s)
		if err != nil {
			return r.fail(ctx, s, err)
		}
		if found {
			c.Status.VMID, c.Status.Node = vm.Ref.ID, vm.Ref.Node
			r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.VMRecoveredEventReason, "found VM %s, created by an earlier attempt", vm.Ref)
			return r.adoptVM(ctx, s)
		}
	}
	if res, err := r.acquireSlot(ctx, s, capacity.OpClone); err != nil || !res.IsZero() {
		return res, err
	}
	ref := claimvm.Ref(c)
	tmpl, err := r.sourceTemplate(ctx, s)
	if err != nil {
		return r.fail(ctx, s, fmt.Errorf("resolving template %s: %w", templateSelector(c), err))
	}
	if c.Status.SourceTemplate == nil {
		// Reserved before the choice was recorded: record it with the clone's task.
		c.Status.SourceTemplate = templateRef(tmpl)
	}
	spec := hypervisor.CloneSpec{
		Source: tmpl.Ref,
		Target: ref,
		Name:   vmName(c),
		Full:   c.Spec.CloneMode == infrav1.CloneFull,
		Owner:  claimvm.Ownership(c),
	}
	if p := c.Spec.Proxmox; p != nil && p.Storage != "" {
		spec.Proxmox = &hypervisor.ProxmoxClone{Storage: p.Storage}
	}
	if st := c.Status.Storage; st != nil && spec.Full {
		spec.Storage = st.StorageName
	}
	if p := s.hc.Spec.Proxmox; p != nil && p.Pool != "" {
		if spec.Proxmox == nil {
			spec.Proxmox = &hypervisor.ProxmoxClone{}
		}
		spec.Proxmox.Pool = p.Pool
	}
	// Clone without reading first: Proxmox refuses a taken VMID, and only then is it worth asking
	// whose VM holds it.
	made, task, err := s.provider.Clone(ctx, spec)
	if errors.Is(err, hypervisor.ErrAlreadyExists) && preallocated {
		return r.adoptVM(ctx, s)
	}
	if err != nil {
		// The template may be gone or replaced: read it again before the next attempt.
		r.cluster(s).ForgetTemplates()
		return r.fail(ctx, s, err)
	}
	if !preallocated {
		c.Status.VMID, c.Status.Node = made.ID, made.Node
		ref = made
	}
	c.Status.CloneStartedTime = &metav1.Time{Time: time.Now()}
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.CloningEventReason, "cloning %s (%s) to VM %s", tmpl.Name, tmpl.Ref, ref)
	r.history().VMCloning(c, s.hc, tmpl)
	return r.recordTask(s, infrav1.TaskClone, ref.Node, task)
}

// findOwnVM looks for the claim's VM among the cluster's owned VMs by the claim's ownership marks:
// how a claim whose provider assigns VM IDs finds a VM whose ID it never recorded.
func (r *Reconciler) findOwnVM(ctx context.Context, s *claimScope) (hypervisor.VM, bool, error) {
	vms, err := s.provider.OwnedVMs(ctx)
	if err != nil {
		return hypervisor.VM{}, false, fmt.Errorf("looking for the VM of claim ID %s: %w", s.claim.Spec.ClaimID, err)
	}
	for _, vm := range vms {
		if claimvm.OwnedBy(vm, s.claim) {
			return vm, true, nil
		}
	}
	return hypervisor.VM{}, false, nil
}

// adoptVM looks at the VM holding the claim's reserved VMID. It is this claim's own clone when an
// earlier process started the clone but stopped before recording its task; otherwise another claim
// or a person took the ID between the proposal and the clone, and another one is chosen.
func (r *Reconciler) adoptVM(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	ref := claimvm.Ref(c)
	vm, err := s.provider.VM(ctx, ref)
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		return ctrl.Result{RequeueAfter: r.poll()}, nil // gone again: clone on the next pass
	case err != nil:
		return r.fail(ctx, s, err)
	case claimvm.LegacyOf(vm, c):
		return r.adoptLegacyVM(ctx, s)
	case !claimvm.OwnedBy(vm, c):
		return r.releaseVMID(s, fmt.Sprintf("VMID %s is taken by another VM", ref.ID))
	case vm.Lock != "":
		setVMCondition(c, metav1.ConditionFalse, infrav1.CloningReason, fmt.Sprintf("VM %s is locked (%s)", ref, vm.Lock))
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	c.Status.CompletedStep = infrav1.StepCloned
	r.setProviderID(s)
	return ctrl.Result{}, nil
}

// adoptLegacyVM re-marks the claim's VM, made by a release before installation identities, with
// the installation's and the claim's identity; the next reconcile continues where it stopped.
func (r *Reconciler) adoptLegacyVM(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if err := s.provider.Adopt(ctx, claimvm.Ref(c), claimvm.Ownership(c), string(c.UID)); err != nil {
		c.Status.FailureCount++
		c.Status.LastFailureTime = &metav1.Time{Time: time.Now()}
		setVMCondition(c, metav1.ConditionFalse, infrav1.HypervisorErrorReason, fmt.Sprintf("adopting VM %s: %v", claimvm.Ref(c), err))
		return ctrl.Result{RequeueAfter: requeue.Backoff(c.Status.FailureCount)}, nil
	}
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.VMAdoptedReason,
		"VM %s re-marked with this installation's identity (claim ID %s)", claimvm.Ref(c), c.Spec.ClaimID)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

func (r *Reconciler) releaseVMID(s *claimScope, why string) (ctrl.Result, error) {
	s.claim.Status.VMID, s.claim.Status.Node = "", ""
	s.claim.Status.FailureCount++ // moves the next VMID proposal elsewhere
	setVMCondition(s.claim, metav1.ConditionFalse, infrav1.CloningReason, why+"; choosing another")
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// reconcileConfigure applies hardware, network, tags, description, the disk size and the merged
// cloud-init data in one provider call, so Proxmox sees a single config write. A disk resize runs
// as a task, recorded like any other.
func (r *Reconciler) reconcileConfigure(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	spec, res, err := r.configSpec(ctx, s)
	if spec == nil {
		return res, err
	}
	task, err := s.provider.Configure(ctx, claimvm.Ref(s.claim), *spec)
	if err != nil {
		return r.fail(ctx, s, err)
	}
	return r.configured(s, spec, task)
}

// reconcileCloneEnd follows an in-flight clone without reading its task: when a clone typically
// ends it configures the VM, whose config read is refused with ErrBusy while PVE still holds the
// clone's lock. So the read that proves the VM ours also shows the clone ended, one call instead of
// a task read and a config read. Only when configuring fails otherwise is the task read: PVE
// removes a failed clone's VM, and the task says why the clone failed.
func (r *Reconciler) reconcileCloneEnd(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	task := c.Status.Task
	if wait := r.untilTaskRead(c); wait > 0 {
		setVMCondition(c, metav1.ConditionFalse, infrav1.CloningReason, fmt.Sprintf("%s task %s running on %s", task.Operation, task.ID, task.Node))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	spec, res, err := r.configSpec(ctx, s)
	if spec == nil {
		return res, err
	}
	// The clone's storage is free once the read proves the clone over: the next clone need not
	// wait for the ISO upload and the config write.
	spec.Proven = func() { r.releaseSlot(s) }
	configTask, err := s.provider.Configure(ctx, claimvm.Ref(c), *spec)
	r.polls.read(c.UID, task.ID)
	switch {
	case errors.Is(err, hypervisor.ErrBusy):
		setVMCondition(c, metav1.ConditionFalse, infrav1.CloningReason, fmt.Sprintf("%s task %s running on %s: %v", task.Operation, task.ID, task.Node, err))
		return ctrl.Result{RequeueAfter: r.polls.next(c.UID, task.ID, r.poll())}, nil
	case err != nil:
		if res, taskErr := r.readInFlightTask(ctx, s); taskErr != nil || !res.IsZero() {
			return res, taskErr // the clone failed, or still runs
		}
		return r.fail(ctx, s, err)
	}
	c.Status.Task = nil
	r.polls.done(c.UID)
	taskSeenOver(s, task)
	r.operationDone(s, infrav1.TaskClone, task.Node)
	return r.configured(s, spec, configTask)
}

// taskSeenOver records how long a task ran when the claim proves it over by other means than its
// task status (a clone by the VM's configuration, a stop or destroy by the VM's state): the task
// was never read done, so the instrumented provider, which times the tasks it sees end, could not.
func taskSeenOver(s *claimScope, t *infrav1.TaskRef) {
	if s.hc == nil || t == nil {
		return
	}
	metrics.ObserveTask(strings.ToLower(string(s.hc.Spec.Provider)), t.Operation, time.Since(t.StartTime.Time))
}

// configured records a configure call's outcome: done, a disk resize task to follow, or, when the
// call started the VM, the start task.
func (r *Reconciler) configured(s *claimScope, spec *hypervisor.ConfigSpec, task hypervisor.TaskID) (ctrl.Result, error) {
	if spec.Start {
		s.claim.Status.CompletedStep = infrav1.StepConfigured
		return r.recordTask(s, infrav1.TaskStart, s.claim.Status.Node, task)
	}
	if task != "" {
		return r.recordTask(s, infrav1.TaskConfigure, s.claim.Status.Node, task)
	}
	s.claim.Status.CompletedStep = infrav1.StepConfigured
	return ctrl.Result{}, nil
}

// configSpec is what configuring the claim's VM applies; nil, with the result to return, when it
// cannot be made.
func (r *Reconciler) configSpec(ctx context.Context, s *claimScope) (*hypervisor.ConfigSpec, ctrl.Result, error) {
	c := s.claim
	if res, err := r.loadBootstrapData(ctx, s); err != nil || !res.IsZero() {
		return nil, res, err
	}
	spec := hypervisor.ConfigSpec{
		Cores:       int(c.Spec.Cores),
		MemoryMiB:   int(c.Spec.MemoryMiB),
		Tags:        c.Spec.Tags,
		Description: fmt.Sprintf("HyperFleet MachineClaim %s/%s", c.Namespace, c.Name),
		ExtraDisks:  extraDisks(c),
	}
	if n := c.Spec.Network; n != nil {
		// An empty name is the provider's default (Proxmox vmbr0, the template's Hyper-V switch).
		spec.Network = &hypervisor.NetworkSpec{Name: n.Name, VLAN: int(ptr.Deref(n.VLAN, 0))}
		if p := c.Spec.Proxmox; p != nil {
			spec.Network.Model = p.NetworkModel
		}
	}
	if p := c.Spec.Proxmox; p != nil {
		for _, d := range p.PCIDevices {
			spec.PCIDevices = append(spec.PCIDevices, hypervisor.PCIDevice{Mapping: d.Mapping, PCIe: d.PCIe, PrimaryGPU: d.PrimaryGPU})
		}
	}
	if c.Spec.DiskSizeGiB > 0 {
		tmpl, err := r.sourceTemplate(ctx, s)
		if err != nil {
			res, err := r.fail(ctx, s, err)
			return nil, res, err
		}
		// A clone's disk is the template's: resize only when that is too small.
		if int(c.Spec.DiskSizeGiB) > tmpl.DiskGiB {
			spec.Disk = &hypervisor.DiskSpec{Name: tmpl.BootDisk, SizeGiB: int(c.Spec.DiskSizeGiB)}
		}
	}
	var templateUserData string
	if c.Spec.CloudInit != nil {
		templateUserData = c.Spec.CloudInit.UserData
	}
	userData, err := cloudinit.Merge(templateUserData, s.bootstrapData)
	if err != nil {
		s.terminal = true
		setVMCondition(c, metav1.ConditionFalse, infrav1.ProvisioningFailedReason, err.Error())
		return nil, ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
	}
	var networkConfig string
	if len(c.Spec.NICs) > 0 {
		if spec.NICs, networkConfig, err = claimNetwork(s); err != nil {
			s.terminal = true
			setVMCondition(c, metav1.ConditionFalse, infrav1.ProvisioningFailedReason, err.Error())
			return nil, ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
		}
		if userData == "" {
			userData = "#cloud-config\n" // NoCloud needs user-data beside the network-config
		}
		if err := r.reserveAddresses(ctx, s); err != nil {
			setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForNetworkReason, err.Error())
			return nil, ctrl.Result{RequeueAfter: networkRetry}, nil
		}
	}
	if userData != "" {
		spec.CloudInit = &hypervisor.CloudInitData{UserData: userData, MetaData: cloudinit.MetaData(string(c.UID), vmName(c)),
			NetworkConfig: networkConfig}
	}
	// A VM that starts right away is started by the configure call on the proof of its own write,
	// saving the read a separate start makes. A warm VM waits stopped, a persistent one for its run
	// strategy, and a grown disk for its resize task.
	spec.Start = s.provider.Capabilities().StartOnConfigure && spec.Disk == nil && !c.Spec.IsPersistent() &&
		c.Annotations[infrav1.WarmAnnotation] == ""
	return &spec, ctrl.Result{}, nil
}

// reconcileStart powers the VM on and records the start task, which reconcileStarting follows.
func (r *Reconciler) reconcileStart(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	ref := claimvm.Ref(s.claim)
	task, err := s.provider.Start(ctx, ref)
	if err != nil {
		return r.fail(ctx, s, err)
	}
	return r.recordTask(s, infrav1.TaskStart, ref.Node, task)
}

// reconcileStarting follows a start. Addresses from the guest agent prove the VM started, so the
// start task is read only while they are missing: that is how a failed start is still reported
// (and retried) without a task poll on every healthy start. A runner's agent proves more than the
// guest agent can (it booted, attested and took its runner config), so a runner's guest agent is
// not polled while it boots: its start task is read once, when a start typically has ended, and
// its addresses once the agent has attested (reconcileBootstrapped).
func (r *Reconciler) reconcileStarting(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if bootstrapRef(s.machine) != nil {
		if res, err := r.reconcileInFlightTask(ctx, s); err != nil || !res.IsZero() {
			return res, err
		}
		r.setProvisioned(s, nil)
		return ctrl.Result{}, nil
	}
	if wait := r.polls.until(c.UID, c.Status.Task.ID, c.Status.Task.StartTime.Time, guestBootTime*r.poll(), r.poll()); wait > 0 {
		setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForAddressReason, "VM is starting; waiting for the guest agent to report an address")
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	addrs, err := s.provider.Addresses(ctx, claimvm.Ref(c))
	if err != nil {
		return r.fail(ctx, s, err)
	}
	if len(addrs) > 0 {
		r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.TaskStart+"Succeeded", "%s of VM %s on %s finished", infrav1.TaskStart, c.Status.VMID, c.Status.Node)
		c.Status.Task = nil
		r.polls.done(c.UID)
		c.Status.CompletedStep = infrav1.StepStarted
		r.setProvisioned(s, addrs)
		return ctrl.Result{}, nil
	}
	// The addresses' read and the task's count as one read for the pacing.
	if res, err := r.readInFlightTask(ctx, s); err != nil || !res.IsZero() {
		return res, err
	}
	setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForAddressReason, "VM is running; waiting for the guest agent to report an address")
	r.polls.read(c.UID, addressPollKey)
	return ctrl.Result{RequeueAfter: r.polls.next(c.UID, addressPollKey, r.poll())}, nil
}

// guestBootTime is how long a guest typically needs before its agent answers, in poll intervals:
// the first address read comes 6 s after the start at the default 2 s interval.
const guestBootTime = 3

// reconcileRunning waits for the guest's addresses and then reports the machine provisioned.
func (r *Reconciler) reconcileRunning(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if ptr.Deref(ptr.Deref(c.Status.Initialization, infrav1.MachineClaimInitializationStatus{}).Provisioned, false) {
		return ctrl.Result{}, nil // steady state: the sweep watches the VM's power state
	}
	if wait := r.polls.until(c.UID, addressPollKey, time.Time{}, 0, r.poll()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	addrs, err := s.provider.Addresses(ctx, claimvm.Ref(c))
	r.polls.read(c.UID, addressPollKey)
	if err != nil {
		return r.fail(ctx, s, err)
	}
	if len(addrs) == 0 {
		setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForAddressReason, "VM is running; waiting for the guest agent to report an address")
		return ctrl.Result{RequeueAfter: r.polls.next(c.UID, addressPollKey, r.poll())}, nil
	}
	r.polls.done(c.UID)
	r.setProvisioned(s, addrs)
	return ctrl.Result{}, nil
}

// setProvisioned records the guest's addresses and reports the machine provisioned. A runner's are
// read later, once its agent has attested: addrs is empty then.
func (r *Reconciler) setProvisioned(s *claimScope, addrs []hypervisor.Address) {
	c := s.claim
	setAddresses(c, addrs)
	c.Status.PowerState = string(hypervisor.PowerStateRunning)
	c.Status.FailureCount, c.Status.LastFailureTime = 0, nil
	c.Status.Initialization = &infrav1.MachineClaimInitializationStatus{Provisioned: ptr.To(true)}
	r.setProviderID(s)
	where := ""
	if len(addrs) > 0 {
		where = " at " + addrs[0].Address
	}
	setVMCondition(c, metav1.ConditionTrue, infrav1.VMRunningReason, fmt.Sprintf("VM %s running%s", claimvm.Ref(c), where))
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.ProvisionedEventReason, "VM %s running%s", claimvm.Ref(c), where)
	r.history().VMRunning(c, s.hc)
	// From the claim's creation: the clone starts within a reconcile of it, and the start time of
	// the clone task is not kept once the task ends.
	metrics.ObserveProvisioning(s.hc.Name, time.Since(c.CreationTimestamp.Time))
	metrics.ProvisioningResult(s.hc.Name, "", true)
}

// provisionedOff completes the provisioning of a persistent VM its run strategy keeps off when
// made (Halted, or Manual without a Start request), as KubeVirt creates such a VirtualMachine
// stopped: the VM exists and is configured, its cloud-init data waits on its seed for the first
// boot, and the run strategy takes over from here.
func (r *Reconciler) provisionedOff(s *claimScope) {
	c := s.claim
	c.Status.CompletedStep = infrav1.StepStarted
	c.Status.PowerState = string(hypervisor.PowerStateStopped)
	c.Status.LastStopCause = infrav1.StopCauseNeverStarted
	c.Status.FailureCount, c.Status.LastFailureTime = 0, nil
	c.Status.Initialization = &infrav1.MachineClaimInitializationStatus{Provisioned: ptr.To(true)}
	r.setProviderID(s)
	setVMCondition(c, metav1.ConditionTrue, infrav1.VMStoppedByRunStrategyReason,
		fmt.Sprintf("VM %s made and left off: runStrategy %s does not start a new VM", claimvm.Ref(c), c.Spec.RunStrategy))
	r.Recorder.Eventf(c, corev1.EventTypeNormal, infrav1.ProvisionedEventReason, "VM %s made and left off (runStrategy %s)", claimvm.Ref(c), c.Spec.RunStrategy)
	metrics.ObserveProvisioning(s.hc.Name, time.Since(c.CreationTimestamp.Time))
	metrics.ProvisioningResult(s.hc.Name, "", true)
}

func setAddresses(c *infrav1.MachineClaim, addrs []hypervisor.Address) {
	c.Status.Addresses = c.Status.Addresses[:0]
	for _, a := range addrs {
		c.Status.Addresses = append(c.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address})
	}
}

// recordTask keeps a started task in status for reconcileInFlightTask to follow. The empty TaskID
// of a synchronous provider means the operation is already done: it is recorded as a finished
// task would be, and the next reconcile, after the status is saved, takes the next step.
func (r *Reconciler) recordTask(s *claimScope, op, node string, task hypervisor.TaskID) (ctrl.Result, error) {
	if task == "" {
		r.operationDone(s, op, node)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	r.relieve(s)
	s.claim.Status.Task = &infrav1.TaskRef{ID: string(task), Node: node, Operation: op, StartTime: metav1.Now()}
	r.polls.started(s.claim.UID, string(task), time.Now())
	setVMCondition(s.claim, metav1.ConditionFalse, reasonFor(op), fmt.Sprintf("%s task %s started on %s", op, task, node))
	first := expectedTaskTime(op, s.claim, r.poll())
	if op == infrav1.TaskStart && bootstrapRef(s.machine) == nil {
		first = guestBootTime * r.poll()
	}
	return ctrl.Result{RequeueAfter: first}, nil
}

// fail records a failed attempt and schedules the retry with exponential backoff. Errors that
// retrying cannot fix mark the claim Failed; it is still retried, slowly, in case the cause is
// fixed outside (a template restored, a privilege granted).
func (r *Reconciler) fail(ctx context.Context, s *claimScope, err error) (ctrl.Result, error) {
	c := s.claim
	if hypervisor.IsOverload(err) && s.hc != nil {
		return r.overloaded(ctx, s, err)
	}
	if errors.Is(err, hypervisor.ErrNotOwned) && c.Status.VMID != "" && s.provider != nil {
		// The VM may still carry an older release's marks: adopt it if it is ours.
		if vm, verr := s.provider.VM(ctx, claimvm.Ref(c)); verr == nil && claimvm.LegacyOf(vm, c) {
			return r.adoptLegacyVM(ctx, s)
		}
	}
	c.Status.FailureCount++
	reason := infrav1.HypervisorErrorReason
	switch {
	case errors.Is(err, hypervisor.ErrNotFound) && c.Status.CompletedStep == "":
		reason = infrav1.TemplateNotFoundReason
		s.terminal = true
	case errors.Is(err, hypervisor.ErrAmbiguous):
		reason = infrav1.TemplateAmbiguousReason
		s.terminal = true
	case errors.Is(err, hypervisor.ErrInvalid), errors.Is(err, hypervisor.ErrForbidden),
		errors.Is(err, hypervisor.ErrNotOwned), errors.Is(err, hypervisor.ErrUnauthorized):
		reason = infrav1.ProvisioningFailedReason
		s.terminal = true
	}
	delay := requeue.Backoff(c.Status.FailureCount)
	c.Status.LastFailureTime = &metav1.Time{Time: time.Now()}
	if s.hc != nil {
		metrics.ProvisioningResult(s.hc.Name, reason, false)
	}
	msg := fmt.Sprintf("%v (attempt %d, retrying in %s)", err, c.Status.FailureCount, delay)
	setVMCondition(c, metav1.ConditionFalse, reason, msg)
	r.Recorder.Event(c, corev1.EventTypeWarning, reason, msg)
	ctrl.LoggerFrom(ctx).Info("provisioning step failed", "reason", reason, "error", err.Error(), "retryIn", delay)
	return ctrl.Result{RequeueAfter: delay}, nil
}

// retryLater records a condition that waits on something outside (capacity, VMIDs) with backoff.
func (r *Reconciler) retryLater(s *claimScope, reason, msg string) (ctrl.Result, error) {
	c := s.claim
	c.Status.FailureCount++
	c.Status.LastFailureTime = &metav1.Time{Time: time.Now()}
	delay := requeue.Backoff(c.Status.FailureCount)
	setVMCondition(c, metav1.ConditionFalse, reason, fmt.Sprintf("%s; retrying in %s", msg, delay))
	return ctrl.Result{RequeueAfter: delay}, nil
}

// backoffRemaining is how long to wait before the next attempt after a failure. Without this gate
// the status update that records a failure would itself trigger an immediate retry.
func (r *Reconciler) backoffRemaining(c *infrav1.MachineClaim) time.Duration {
	if c.Status.LastFailureTime == nil || c.Status.FailureCount == 0 {
		return 0
	}
	return time.Until(c.Status.LastFailureTime.Add(requeue.Backoff(c.Status.FailureCount)))
}
