package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/sweep"
)

// Sweeper runs the power-state sweep of a HypervisorCluster: one listing of the owned VMs, then
// runners whose VM stopped are retired and orphan VMs removed.
type Sweeper struct {
	Client      client.Client
	Recorder    record.EventRecorder
	OrphanGrace time.Duration

	mu      sync.Mutex
	orphans map[string]sweep.Orphans
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
	byUID := map[string]*infrav1.MachineClaim{}
	infos := make([]sweep.Claim, 0, len(claims.Items))
	for i := range claims.Items {
		c := &claims.Items[i]
		byUID[string(c.UID)] = c
		infos = append(infos, sweep.Claim{
			Namespace: c.Namespace, Name: c.Name, UID: string(c.UID), VMID: int(c.Status.VMID),
			Started:  c.Status.CompletedStep == infrav1.StepStarted,
			Deleting: !c.DeletionTimestamp.IsZero(),
			Busy:     c.Status.Task != nil,
		})
	}
	plan := sweep.Decide(vms, infos, s.orphanMemory(connection.Key(hc)), time.Now(), s.OrphanGrace)

	var errs []error
	for _, c := range plan.Retire {
		if err := s.retire(ctx, byUID[c.UID]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, vm := range plan.RemoveOrphans {
		if err := s.removeOrphan(ctx, hc, provider, vm); err != nil {
			errs = append(errs, err)
		}
	}
	hc.Status.OwnedVMs = int32(plan.Owned)
	hc.Status.LastSweepTime = &metav1.Time{Time: time.Now()}
	log.V(1).Info("swept", "ownedVMs", plan.Owned, "retired", len(plan.Retire), "orphans", len(plan.RemoveOrphans))
	return errors.Join(errs...)
}

// retire ends a runner whose VM is done: the owner Machine is deleted so its owner (a RunnerPool or
// MachineSet) sees it go; a claim without a Machine is deleted itself. Either way the claim's
// finalizer then destroys the VM.
func (s *Sweeper) retire(ctx context.Context, claim *infrav1.MachineClaim) error {
	machine, err := util.GetOwnerMachine(ctx, s.Client, claim.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var target client.Object = claim
	if machine != nil {
		target = machine
	}
	msg := fmt.Sprintf("VM %d stopped or disappeared; deleting %s %s", claim.Status.VMID, kindOf(target), target.GetName())
	ctrl.LoggerFrom(ctx).Info(msg, "MachineClaim", klogRef(claim))
	s.Recorder.Event(claim, corev1.EventTypeNormal, "VMStopped", msg)
	if err := s.Client.Delete(ctx, target, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
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
	s.Recorder.Eventf(hc, corev1.EventTypeNormal, "OrphanRemoved", "VM %s of deleted MachineClaim %s: %s",
		vm.Ref, vm.Owner.Claim(), map[bool]string{true: "destroying", false: "stopping"}[vm.State == hypervisor.PowerStateStopped])
	return nil
}

func (s *Sweeper) orphanMemory(key string) sweep.Orphans {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orphans == nil {
		s.orphans = map[string]sweep.Orphans{}
	}
	if s.orphans[key] == nil {
		s.orphans[key] = sweep.Orphans{}
	}
	return s.orphans[key]
}

// Forget drops the memory of a deleted HypervisorCluster.
func (s *Sweeper) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.orphans, key)
}

func kindOf(o client.Object) string {
	if _, ok := o.(*clusterv1.Machine); ok {
		return "Machine"
	}
	return "MachineClaim"
}
