package vmstorage

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimvm"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmnetwork"
)

// scheduleName is the MachineSnapshotSchedule the storage's defaults make for a claim.
func scheduleName(claim string) string { return claim + "-storage-snapshots" }

// reconcileSnapshots gives every Persistent VM on the storage a MachineSnapshotSchedule with the
// storage's schedule and retention, unless the VM has a schedule of its own. The schedule is
// owned by the claim, so it goes with the VM; it is made once and then left to its owners.
func (r *Reconciler) reconcileSnapshots(ctx context.Context, st *fleetv1.VMStorage, claims []infrav1.MachineClaim) error {
	if st.Spec.Snapshots == nil {
		return nil
	}
	var schedules fleetv1.MachineSnapshotScheduleList
	for i := range claims {
		c := &claims[i]
		if !c.Spec.IsPersistent() || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if schedules.Items == nil {
			if err := r.Client.List(ctx, &schedules); err != nil {
				return err
			}
		}
		own := false
		for _, s := range schedules.Items {
			if s.Namespace == c.Namespace && s.Spec.Source.MachineClaimName == c.Name {
				own = true
				break
			}
		}
		if own {
			continue
		}
		sched := &fleetv1.MachineSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: scheduleName(c.Name), Namespace: c.Namespace,
				Labels: map[string]string{fleetv1.VMStorageNameLabel: vmnetwork.Key(st.Namespace, st.Name)}},
			Spec: fleetv1.MachineSnapshotScheduleSpec{
				Source:    fleetv1.MachineSnapshotSource{MachineClaimName: c.Name},
				Schedule:  st.Spec.Snapshots.Schedule,
				TimeZone:  "UTC",
				Retention: st.Spec.Snapshots.Retention.DeepCopy(),
			},
		}
		if err := controllerutil.SetOwnerReference(c, sched, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, sched); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the storage's snapshot schedule for MachineClaim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return nil
}

// reconcileReplication gives every Persistent VM on the storage a replication job to the target
// node and reports the oldest last replication.
func (r *Reconciler) reconcileReplication(ctx context.Context, st *fleetv1.VMStorage, claims []infrav1.MachineClaim) {
	rep := st.Spec.Replication
	if rep == nil {
		conditions.Delete(st, fleetv1.ReplicatedCondition)
		st.Status.LastReplication = nil
		return
	}
	var failures []string
	var oldest *time.Time
	count := 0
	for i := range claims {
		c := &claims[i]
		if !c.Spec.IsPersistent() || c.Status.VMID == "" || c.Status.CompletedStep != infrav1.StepStarted || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if c.Status.Node == rep.TargetNode {
			failures = append(failures, fmt.Sprintf("%s/%s runs on %s, the replication target", c.Namespace, c.Name, rep.TargetNode))
			continue
		}
		vm, err := claimvm.ResolveProvider(ctx, r.Client, r.Registry, c.Namespace, c.Name)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s/%s: %v", c.Namespace, c.Name, err))
			continue
		}
		repl, ok := hypervisor.As[hypervisor.Replicator](vm.Provider)
		if !ok {
			failures = append(failures, fmt.Sprintf("%s/%s: HypervisorCluster %s's provider does not replicate disks", c.Namespace, c.Name, vm.HC.Name))
			continue
		}
		job := hypervisor.ReplicationJob{VM: claimvm.Ref(c), Target: rep.TargetNode, Schedule: rep.Schedule}
		if rep.RateMBps != nil {
			job.RateMBps = int(*rep.RateMBps)
		}
		if err := repl.EnsureReplication(ctx, job); err != nil {
			failures = append(failures, fmt.Sprintf("%s/%s: %v", c.Namespace, c.Name, err))
			continue
		}
		state, err := repl.ReplicationState(ctx, job.VM)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s/%s: %v", c.Namespace, c.Name, err))
			continue
		case state.Error != "":
			failures = append(failures, fmt.Sprintf("%s/%s: last replication failed: %s", c.Namespace, c.Name, state.Error))
			continue
		case state.LastSync.IsZero():
			failures = append(failures, fmt.Sprintf("%s/%s: not replicated yet", c.Namespace, c.Name))
			continue
		}
		count++
		if oldest == nil || state.LastSync.Before(*oldest) {
			t := state.LastSync
			oldest = &t
		}
	}
	if oldest != nil {
		st.Status.LastReplication = &metav1.Time{Time: *oldest}
	}
	if len(failures) > 0 {
		conditions.Set(st, metav1.Condition{Type: fleetv1.ReplicatedCondition, Status: metav1.ConditionFalse, Reason: fleetv1.ReplicationFailedReason,
			Message: strings.Join(failures, "; ")})
		return
	}
	conditions.Set(st, metav1.Condition{Type: fleetv1.ReplicatedCondition, Status: metav1.ConditionTrue, Reason: fleetv1.ReplicatedReason,
		Message: fmt.Sprintf("%d VM(s) replicated to %s", count, rep.TargetNode)})
}
