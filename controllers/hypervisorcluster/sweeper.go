package hypervisorcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/sweep"
)

// Sweeper runs the power-state sweep of a HypervisorCluster: one listing of the owned VMs, then
// runners whose VM stopped are retired, VMs of older releases adopted and orphan VMs removed.
type Sweeper struct {
	Client      client.Client
	Recorder    record.EventRecorder
	OrphanGrace time.Duration
	// Clusters keeps each HypervisorCluster's orphans between sweeps.
	Clusters *clusterruntime.Runtimes
}

// Sweep runs one sweep and records its outcome in hc's status.
func (s *Sweeper) Sweep(ctx context.Context, hc *infrav1.HypervisorCluster, provider hypervisor.Provider) error {
	log := ctrl.LoggerFrom(ctx)
	vms, err := provider.OwnedVMs(ctx)
	if err != nil {
		return fmt.Errorf("listing owned VMs: %w", err)
	}
	claims := &infrav1.MachineClaimList{}
	if err := s.Client.List(ctx, claims, client.InNamespace(hc.Namespace),
		client.MatchingLabels{infrav1.HypervisorClusterNameLabel: hc.Name}); err != nil {
		return err
	}
	byName := map[string]*infrav1.MachineClaim{}
	infos := make([]sweep.Claim, 0, len(claims.Items))
	for i := range claims.Items {
		c := &claims.Items[i]
		byName[c.Name] = c
		infos = append(infos, sweep.Claim{
			Namespace: c.Namespace, Name: c.Name, ID: c.Spec.ClaimID, UID: string(c.UID), VMID: c.Status.VMID,
			Started:    c.Status.CompletedStep == infrav1.StepStarted,
			Deleting:   !c.DeletionTimestamp.IsZero(),
			Busy:       c.Status.Task != nil,
			Persistent: c.Spec.IsPersistent(),
			Warm:       infrav1.IsWarmHeld(c.Annotations),
		})
	}
	plan := sweep.Decide(vms, infos, s.Clusters.For(hc).Orphans(), time.Now(), s.OrphanGrace)

	var errs []error
	for _, a := range plan.Adopt {
		if err := s.adopt(ctx, provider, byName[a.Claim.Name], a.VM); err != nil {
			errs = append(errs, err)
		}
	}
	retire := plan.Retire
	for _, c := range plan.Missing {
		// One listing may miss a node's VMs: only a direct read saying the VM does not exist
		// retires the runner.
		gone, err := s.confirmGone(ctx, provider, byName[c.Name])
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			retire = append(retire, c)
		}
	}
	for _, c := range retire {
		if err := s.retire(ctx, byName[c.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, vm := range plan.RemoveOrphans {
		if err := s.removeOrphan(ctx, hc, provider, vm); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range plan.Observed {
		if err := s.observe(ctx, byName[o.Claim.Name], o.VM); err != nil {
			errs = append(errs, err)
		}
	}
	s.clearStoppedMarks(ctx, vms, byName)
	hc.Status.OwnedVMs = int32(plan.Owned)
	hc.Status.LastSweepTime = &metav1.Time{Time: time.Now()}
	log.V(1).Info("swept", "ownedVMs", plan.Owned, "retired", len(retire), "orphans", len(plan.RemoveOrphans),
		"adopted", len(plan.Adopt), "untrackedLegacyVMs", plan.Legacy)
	return errors.Join(errs...)
}

// confirmGone reads a claim's VM that a listing did not show. Only NotFound means gone; a node that
// does not answer means nothing.
func (s *Sweeper) confirmGone(ctx context.Context, provider hypervisor.Provider, claim *infrav1.MachineClaim) (bool, error) {
	vm, err := provider.VM(ctx, claimvm.Ref(claim))
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("confirming VM %s of MachineClaim %s is gone: %w", claim.Status.VMID, claim.Name, err)
	}
	// Listed again, or visible to a direct read: retired only if it stopped, like a listed one.
	return claimvm.OwnedBy(vm, claim) && vm.State == hypervisor.PowerStateStopped && vm.Lock == "", nil
}

// adopt re-marks a VM made by a release before installation identities with the claim's identity.
func (s *Sweeper) adopt(ctx context.Context, provider hypervisor.Provider, claim *infrav1.MachineClaim, vm hypervisor.VM) error {
	if err := provider.Adopt(ctx, vm.Ref, claimvm.Ownership(claim), string(claim.UID)); err != nil {
		return fmt.Errorf("adopting VM %s of MachineClaim %s: %w", vm.Ref, claim.Name, err)
	}
	s.Recorder.Eventf(claim, corev1.EventTypeNormal, infrav1.VMAdoptedReason,
		"VM %s re-marked with this installation's identity (claim ID %s)", vm.Ref, claim.Spec.ClaimID)
	return nil
}

// retire ends a runner whose VM is done. A claim without a Machine is deleted, and its finalizer
// destroys the VM. A RunnerPool's Machine is never deleted here: it is marked for remediation, and
// the pool removes it by its own rule (a runner the CI platform says is running a job stays). A
// Machine of another owner is deleted, as its owner expects of infrastructure that is gone.
func (s *Sweeper) retire(ctx context.Context, claim *infrav1.MachineClaim) error {
	machine, err := util.GetOwnerMachine(ctx, s.Client, claim.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("MachineClaim", klog.KObj(claim))
	switch {
	case machine == nil:
		msg := fmt.Sprintf("VM %s stopped or disappeared; deleting MachineClaim %s", claim.Status.VMID, claim.Name)
		log.Info(msg)
		s.Recorder.Event(claim, corev1.EventTypeNormal, infrav1.VMStoppedReason, msg)
		return client.IgnoreNotFound(s.Client.Delete(ctx, claim, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	case machine.Labels[fleetv1.RunnerPoolNameLabel] != "":
		if !machine.DeletionTimestamp.IsZero() {
			return nil
		}
		// Marked again on every sweep while the VM stays stopped: each mark wakes the pool, which
		// kept the runner because the CI platform said it was busy, to ask again.
		if _, marked := machine.Annotations[infrav1.VMStoppedAnnotation]; !marked {
			msg := fmt.Sprintf("VM %s stopped or disappeared; Machine %s marked for its RunnerPool to replace", claim.Status.VMID, machine.Name)
			log.Info(msg)
			s.Recorder.Event(claim, corev1.EventTypeNormal, infrav1.VMStoppedReason, msg)
		}
		patch := client.MergeFrom(machine.DeepCopy())
		if machine.Annotations == nil {
			machine.Annotations = map[string]string{}
		}
		machine.Annotations[infrav1.VMStoppedAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		machine.Annotations[clusterv1.RemediateMachineAnnotation] = ""
		return client.IgnoreNotFound(s.Client.Patch(ctx, machine, patch))
	default:
		msg := fmt.Sprintf("VM %s stopped or disappeared; deleting Machine %s", claim.Status.VMID, machine.Name)
		log.Info(msg)
		s.Recorder.Event(claim, corev1.EventTypeNormal, infrav1.VMStoppedReason, msg)
		return client.IgnoreNotFound(s.Client.Delete(ctx, machine, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	}
}

// clearStoppedMarks takes the sweep's mark off a Machine whose VM runs again (it was seen stopped
// by mistake, or a person started it): the pool must not replace a runner that works.
func (s *Sweeper) clearStoppedMarks(ctx context.Context, vms []hypervisor.VM, claims map[string]*infrav1.MachineClaim) {
	running := map[string]bool{}
	for _, vm := range vms {
		if vm.State == hypervisor.PowerStateRunning {
			running[vm.Ref.ID] = true
		}
	}
	for _, claim := range claims {
		if claim.Status.VMID == "" || !running[claim.Status.VMID] || !claim.DeletionTimestamp.IsZero() {
			continue
		}
		machine, err := util.GetOwnerMachine(ctx, s.Client, claim.ObjectMeta)
		if err != nil || machine == nil || !machine.DeletionTimestamp.IsZero() {
			continue
		}
		if _, marked := machine.Annotations[infrav1.VMStoppedAnnotation]; !marked {
			continue
		}
		patch := client.MergeFrom(machine.DeepCopy())
		delete(machine.Annotations, infrav1.VMStoppedAnnotation)
		delete(machine.Annotations, clusterv1.RemediateMachineAnnotation)
		if err := s.Client.Patch(ctx, machine, patch); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "clearing the VM-stopped mark", "Machine", klog.KObj(machine))
		}
	}
}

// removeOrphan stops, then on a later sweep destroys, an owned VM whose MachineClaim is gone.
func (s *Sweeper) removeOrphan(ctx context.Context, hc *infrav1.HypervisorCluster, provider hypervisor.Provider, vm hypervisor.VM) error {
	var err error
	if vm.State == hypervisor.PowerStateStopped {
		_, err = provider.Delete(ctx, vm.Ref)
	} else {
		_, err = provider.Stop(ctx, vm.Ref)
	}
	if err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
		return fmt.Errorf("removing orphan VM %s: %w", vm.Ref, err)
	}
	s.Recorder.Eventf(hc, corev1.EventTypeNormal, infrav1.OrphanRemovedEventReason, "VM %s of deleted MachineClaim %s: %s",
		vm.Ref, vm.Owner.Claim(), map[bool]string{true: "destroying", false: "stopping"}[vm.State == hypervisor.PowerStateStopped])
	return nil
}
