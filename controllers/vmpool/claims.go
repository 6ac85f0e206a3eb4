package vmpool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmpool"
)

const vmPoolFieldOwner = client.FieldOwner("vmpool-controller")

// reconcileClaims reads the pool's claims and how far each VM got. Only claims the pool controls
// count: a claim that merely carries the pool's label is someone else's and is never touched.
func (r *Reconciler) reconcileClaims(ctx context.Context, s *vmPoolScope) (ctrl.Result, error) {
	list := &infrav1.MachineClaimList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.pool.Namespace),
		client.MatchingLabels{fleetv1.VMPoolNameLabel: s.pool.Name}); err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	minReady := time.Duration(s.pool.Spec.MinReadySeconds) * time.Second
	s.claims = map[string]*infrav1.MachineClaim{}
	s.vms = nil
	for i := range list.Items {
		c := &list.Items[i]
		if !metav1.IsControlledBy(c, s.pool) {
			continue
		}
		s.claims[c.Name] = c
		vm := vmpool.VM{
			Name:     c.Name,
			Created:  c.CreationTimestamp.Time,
			Updated:  s.hash != "" && c.Labels[fleetv1.VMPoolTemplateHashLabel] == s.hash,
			Deleting: !c.DeletionTimestamp.IsZero(),
		}
		// The claim's controller patches its conditions and the rest of its status in two
		// requests; a claim read between them says Ready with the phase it had before. Only a
		// claim whose phase agrees is counted, so the pool never reports a VM available while
		// listing it as provisioning (its status patch is an event that reconciles the pool again).
		phase := c.Status.Phase
		settled := phase == infrav1.MachineClaimPhaseRunning || phase == infrav1.MachineClaimPhaseReady
		if ready := conditions.Get(c, infrav1.ReadyCondition); ready != nil && ready.Status == metav1.ConditionTrue && !vm.Deleting && settled {
			vm.Ready = true
			availableAt := ready.LastTransitionTime.Add(minReady)
			if vm.Available = !now.Before(availableAt); !vm.Available {
				s.recheckIn(availableAt.Sub(now) + 100*time.Millisecond)
			}
		}
		s.vms = append(s.vms, vm)
	}
	s.listed = true
	return ctrl.Result{}, nil
}

// reconcileMetadata applies template.metadata to the claims in place: labels and annotations the
// template adds or changes reach every claim without replacing its VM (ones the template drops stay).
func (r *Reconciler) reconcileMetadata(ctx context.Context, s *vmPoolScope) (ctrl.Result, error) {
	meta := s.pool.Spec.Template.ObjectMeta
	for _, c := range s.claims {
		if !c.DeletionTimestamp.IsZero() || (containsAll(c.Labels, meta.Labels) && containsAll(c.Annotations, meta.Annotations)) {
			continue
		}
		before := c.DeepCopy()
		c.Labels = mergeInto(c.Labels, meta.Labels)
		c.Annotations = mergeInto(c.Annotations, meta.Annotations)
		if err := r.Client.Patch(ctx, c, client.MergeFrom(before), vmPoolFieldOwner); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("updating the metadata of MachineClaim %s: %w", c.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func mergeInto(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// reconcileRollout creates and deletes claims as pkg/vmpool's plan says.
func (r *Reconciler) reconcileRollout(ctx context.Context, s *vmPoolScope) (ctrl.Result, error) {
	p := s.pool
	replicas := int(ptr.Deref(p.Spec.Replicas, 1))
	strategy, err := vmpool.ResolveStrategy(p.Spec.Strategy, replicas)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := vmpool.PlanRollout(replicas, strategy, s.vms)
	var errs []error
	var deleted []string
	for _, name := range plan.Delete {
		c := s.claims[name]
		if err := r.Client.Delete(ctx, c); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting MachineClaim %s: %w", name, err))
			}
			continue
		}
		deleted = append(deleted, name)
		r.Recorder.Eventf(p, corev1.EventTypeNormal, fleetv1.DeletedVMEventReason, "deleted MachineClaim %s", name)
		ctrl.LoggerFrom(ctx).Info("deleted claim", "MachineClaim", name)
	}
	var created []string
	for range plan.Create {
		name, err := r.createClaim(ctx, s)
		if err != nil {
			conditions.Set(p, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
				Reason: fleetv1.VMPoolCreateFailedReason, Message: err.Error()})
			errs = append(errs, err)
			break
		}
		created = append(created, name)
		r.Recorder.Eventf(p, corev1.EventTypeNormal, fleetv1.CreatedVMEventReason, "created MachineClaim %s", name)
		ctrl.LoggerFrom(ctx).Info("created claim", "MachineClaim", name)
	}
	if len(created) > 0 || len(deleted) > 0 {
		// Wait until the cache shows what was done, so the next reconcile plans from it and does not
		// create or delete a second time.
		if err := r.waitForCache(ctx, p.Namespace, created, deleted); err != nil {
			errs = append(errs, err)
		}
		// Count what was done in the status this reconcile writes.
		if _, err := r.reconcileClaims(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// vmPoolNameAttempts bounds how many names a new claim tries when the ones generated are taken.
const vmPoolNameAttempts = 3

// createClaim creates one claim from the current template, named <pool>-<hash>-<random>. A name
// someone else's object holds is given up for another (the claim is created, never applied over it).
func (r *Reconciler) createClaim(ctx context.Context, s *vmPoolScope) (string, error) {
	p := s.pool
	for range vmPoolNameAttempts {
		c := &infrav1.MachineClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("%s-%s-%s", p.Name, s.hash, rand.String(5)),
				Namespace:       p.Namespace,
				Labels:          mergeInto(map[string]string{}, p.Spec.Template.ObjectMeta.Labels),
				Annotations:     mergeInto(nil, p.Spec.Template.ObjectMeta.Annotations),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(p, fleetv1.GroupVersion.WithKind("VMPool"))},
			},
			Spec: *p.Spec.Template.Spec.DeepCopy(),
		}
		c.Labels[fleetv1.VMPoolNameLabel] = p.Name
		c.Labels[fleetv1.VMPoolTemplateHashLabel] = s.hash
		err := r.Client.Create(ctx, c, vmPoolFieldOwner)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("creating a MachineClaim: %w", err)
		}
		return c.Name, nil
	}
	return "", fmt.Errorf("creating a MachineClaim: %d generated names were taken", vmPoolNameAttempts)
}

// waitForCache waits until the cache holds the created claims and shows the deleted ones deleting
// or gone.
func (r *Reconciler) waitForCache(ctx context.Context, ns string, created, deleted []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seen := func(name string, wantDeleted bool) (bool, error) {
		c := &infrav1.MachineClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c)
		switch {
		case apierrors.IsNotFound(err):
			return wantDeleted, nil
		case err != nil:
			return false, err
		}
		return !wantDeleted || !c.DeletionTimestamp.IsZero(), nil
	}
	for _, batch := range []struct {
		names   []string
		deleted bool
	}{{created, false}, {deleted, true}} {
		for _, name := range batch.names {
			for {
				ok, err := seen(name, batch.deleted)
				if err != nil {
					return err
				}
				if ok {
					break
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("MachineClaim %s: the cache did not catch up: %w", name, ctx.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// recheckIn asks for another reconcile within d.
func (s *vmPoolScope) recheckIn(d time.Duration) {
	if s.recheck == 0 || d < s.recheck {
		s.recheck = d
	}
}
