package runnerpool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/scaling"
)

const runnerPoolFieldOwner = client.FieldOwner("runnerpool-controller")

// reconcileRunners reads the pool's Machines and how far each runner got.
func (r *Reconciler) reconcileRunners(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	listed, err := r.listing(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	attested := map[string]time.Time{}
	for _, c := range listed.configs {
		if c.Status.AttestedTime != nil {
			attested[c.Name] = c.Status.AttestedTime.Time
		}
	}
	warm, err := r.warmRunners(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.machines = map[string]*clusterv1.Machine{}
	s.runners, s.warmReady = nil, 0
	for i := range listed.machines {
		m := &listed.machines[i]
		if !metav1.IsControlledBy(m, s.pool) {
			continue
		}
		s.machines[m.Name] = m
		rn := scaling.Runner{
			Name:      m.Name,
			Created:   m.CreationTimestamp.Time,
			Deleting:  !m.DeletionTimestamp.IsZero(),
			Unhealthy: needsRemediation(m),
		}
		_, rn.VMStopped = m.Annotations[infrav1.VMStoppedAnnotation]
		_, rn.HostMaintenance = m.Annotations[infrav1.HostMaintenanceAnnotation]
		warm[m.Name].apply(&rn)
		if warm[m.Name].ready && rn.Warm && !rn.Deleting {
			s.warmReady++
		}
		// A runner is ready once its VM proved its identity and fetched its runner configuration.
		if t, ok := attested[bootstrapConfigName(m)]; ok {
			rn.Ready, rn.ReadySince = true, t
		}
		s.runners = append(s.runners, rn)
	}
	return ctrl.Result{}, nil
}

// needsRemediation reports what MachineHealthCheck decided: OwnerRemediated=False asks the owner
// (as for a MachineSet) to delete and replace the Machine.
func needsRemediation(m *clusterv1.Machine) bool {
	if _, ok := m.Annotations[clusterv1.RemediateMachineAnnotation]; ok {
		return true
	}
	return conditions.IsFalse(m, clusterv1.MachineOwnerRemediatedCondition)
}

func bootstrapConfigName(m *clusterv1.Machine) string {
	if ref := m.Spec.Bootstrap.ConfigRef; ref.IsDefined() && ref.Kind == "BootstrapConfig" {
		return ref.Name
	}
	return m.Name
}

// runnerNameAttempts bounds how many names a new runner tries when the ones generated are taken.
const runnerNameAttempts = 3

// errRunnerNameTaken means an object of the name generated for a new runner already exists.
var errRunnerNameTaken = errors.New("runner name taken")

// createRunner creates one runner: its BootstrapConfig and MachineClaim from the pool's templates,
// then the Machine that ties them together. A generated name may be taken by someone else's
// object: objects are created (never applied with forced ownership, which would take the other
// object over), and a taken name is given up for another.
func (r *Reconciler) createRunner(ctx context.Context, s *poolScope, warm bool) (string, error) {
	pool := s.pool
	bct := &bootstrapv1.BootstrapConfigTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.Template.BootstrapConfigRef.Name}, bct); err != nil {
		return "", r.templateError(s, "BootstrapConfigTemplate", pool.Spec.Template.BootstrapConfigRef.Name, err)
	}
	target, err := s.nextTarget()
	if err != nil {
		return "", err
	}
	mct := &infrav1.MachineClaimTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: target.claimTemplate}, mct); err != nil {
		return "", r.templateError(s, "MachineClaimTemplate", target.claimTemplate, err)
	}
	for range runnerNameAttempts {
		name := r.runnerName(pool.Name)
		err = r.createRunnerNamed(ctx, pool, bct, mct, target, name, warm)
		if err == nil {
			s.placed(target.name)
			ctrl.LoggerFrom(ctx).Info("created runner", "Machine", name, "Cluster", target.clusterName, "target", target.name)
			kind := ""
			if warm {
				kind = " (warm: cloned and configured, started on demand)"
			}
			if target.name != "" {
				r.Recorder.Eventf(pool, corev1.EventTypeNormal, fleetv1.RunnerCreatedEventReason, "created Machine %s on target %s (Cluster %s)%s", name, target.name, target.clusterName, kind)
			} else {
				r.Recorder.Eventf(pool, corev1.EventTypeNormal, fleetv1.RunnerCreatedEventReason, "created Machine %s%s", name, kind)
			}
			return name, nil
		}
		if !errors.Is(err, errRunnerNameTaken) {
			return "", err
		}
		ctrl.LoggerFrom(ctx).Info("runner name is taken by another object; trying another", "name", name, "reason", err.Error())
		r.Recorder.Eventf(pool, corev1.EventTypeWarning, fleetv1.RunnerNameTakenEventReason, "not creating runner %s: %v", name, err)
	}
	return "", err
}

func (r *Reconciler) runnerName(pool string) string {
	if r.RunnerName != nil {
		return r.RunnerName(pool)
	}
	return names.SimpleNameGenerator.GenerateName(pool + "-")
}

func (r *Reconciler) createRunnerNamed(ctx context.Context, pool *fleetv1.RunnerPool, bct *bootstrapv1.BootstrapConfigTemplate,
	mct *infrav1.MachineClaimTemplate, target runnerTarget, name string, warm bool) error {
	labels := map[string]string{}
	for k, v := range pool.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	labels[clusterv1.ClusterNameLabel] = target.clusterName
	labels[fleetv1.RunnerPoolNameLabel] = pool.Name
	if target.name != "" {
		labels[fleetv1.RunnerTargetLabel] = target.name
	}
	poolRef := metav1.OwnerReference{APIVersion: fleetv1.GroupVersion.String(), Kind: "RunnerPool", Name: pool.Name, UID: pool.UID}
	// Each object carries its template's labels and annotations, then the pool's (as a
	// MachineSet copies its template's onto its Machines), then the labels HyperFleet relies on.
	meta := func(template clusterv1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: pool.Namespace,
			Labels:          merged(map[string]string{}, template.Labels, labels),
			Annotations:     merged(nil, template.Annotations, pool.Spec.Template.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{poolRef}}
	}

	config := &bootstrapv1.BootstrapConfig{
		ObjectMeta: meta(bct.Spec.Template.ObjectMeta),
		Spec:       bct.Spec.Template.Spec,
	}
	claim := &infrav1.MachineClaim{
		ObjectMeta: meta(mct.Spec.Template.ObjectMeta),
		Spec:       mct.Spec.Template.Spec,
	}
	if warm {
		markWarm(config, claim)
	}
	machineMeta := meta(clusterv1.ObjectMeta{})
	machineMeta.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(pool, fleetv1.GroupVersion.WithKind("RunnerPool"))}
	machine := &clusterv1.Machine{
		ObjectMeta: machineMeta,
		Spec: clusterv1.MachineSpec{
			ClusterName: target.clusterName,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name},
			FailureDomain: pool.Spec.Template.FailureDomain,
		},
	}
	var created []client.Object
	for _, obj := range []client.Object{config, claim, machine} {
		err := r.Client.Create(ctx, obj, runnerPoolFieldOwner)
		if err == nil {
			created = append(created, obj)
			continue
		}
		// Leave nothing half-made (a Machine-less claim or config would never be cleaned up), and
		// delete only what this call created: an object that was already there is someone else's.
		for _, made := range created {
			uid := made.GetUID()
			_ = client.IgnoreNotFound(r.Client.Delete(ctx, made, client.Preconditions{UID: &uid}))
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%w: %T %s/%s already exists", errRunnerNameTaken, obj, pool.Namespace, name)
		}
		return fmt.Errorf("creating runner %s: %w", name, err)
	}
	return nil
}

// sparesJobs tells the removals that must never kill a job: the pool has too many runners, one
// idled too long, one seemed never to bootstrap (a runner running a job plainly did), or its host
// is drained for maintenance (busy runners finish their job). An unhealthy runner or one past its
// maximum lifetime goes regardless.
func sparesJobs(reason scaling.Reason) bool {
	switch reason {
	case scaling.ReasonScaleDown, scaling.ReasonIdleTTL, scaling.ReasonBootstrapTimeout, scaling.ReasonHostMaintenance, scaling.ReasonJobDone:
		return true
	}
	return false
}

func (r *Reconciler) templateError(s *poolScope, kind, name string, err error) error {
	if apierrors.IsNotFound(err) {
		conditions.Set(s.pool, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: fleetv1.PoolTemplateNotFoundReason, Message: fmt.Sprintf("%s %s not found", kind, name)})
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}

// removeRunner deletes a runner's Machine. A runner that may have registered is first deregistered
// from the CI platform; if the platform says it is running a job, it stays (scale-down must never
// kill a job). It reports whether the Machine was deleted.
func (r *Reconciler) removeRunner(ctx context.Context, s *poolScope, rm scaling.Removal) (bool, error) {
	m, ok := s.machines[rm.Name]
	if !ok {
		return false, nil
	}
	config, err := r.retire(ctx, m)
	if err != nil {
		return false, err
	}
	// The sweep marks a runner whose VM it saw stopped or gone; that sighting may be wrong (a
	// listing that missed a node), so such a runner is removed by the rule that never kills a job.
	_, vmStopped := m.Annotations[infrav1.VMStoppedAnnotation]
	spares := sparesJobs(rm.Reason) || vmStopped
	if config == runnerConfigIssuing && spares {
		// The runner is being registered right now and may take a job the moment it is: decide
		// once the bootstrap service is done (its status update brings the pool back).
		ctrl.LoggerFrom(ctx).Info("runner config is being issued; deciding after", "Machine", rm.Name)
		return false, nil
	}
	// A runner scaled down, or whose VM was seen stopped, is removed only once the platform has
	// let it go: it may have taken a job.
	mustDeregister := rm.Reason == scaling.ReasonScaleDown || vmStopped
	if config != runnerConfigRetired && r.Platforms != nil {
		if at, limited := rateLimitedUntil(s.pool); limited && time.Now().Before(at) {
			// The platform takes no call before at: keep the runner until then, or remove it
			// without the call where a failed call would not have kept it either.
			if mustDeregister {
				s.recheckBy(time.Until(at))
				return false, nil
			}
		} else if wait := r.deregistrations.wait(m.UID, time.Now()); wait > 0 && mustDeregister {
			// The platform failed this runner's deregistration a moment ago: the pool's other
			// events must not call it again at once (an outage would turn every event into calls).
			s.recheckBy(wait)
			return false, nil
		} else {
			err := r.deregister(ctx, s, rm.Name)
			if err == nil || errors.Is(err, platform.ErrRunnerBusy) {
				r.deregistrations.forget(m.UID)
			}
			switch {
			case errors.Is(err, platform.ErrRunnerBusy):
				if spares {
					ctrl.LoggerFrom(ctx).Info("runner picked up a job; keeping it", "Machine", rm.Name)
					return false, nil
				}
			case errors.Is(err, platform.ErrRateLimited) && mustDeregister:
				// Not an error to retry at once: each retry would spend what is left of the limit
				// (a soak once made ten thousand such calls in ten minutes). The pool says when
				// calls resume and comes back then.
				r.holds.hold(s.pool.UID, setRateLimited(s, err))
				return false, nil
			case err != nil && mustDeregister:
				s.recheckBy(r.deregistrations.failed(m.UID, time.Now()))
				return false, fmt.Errorf("deregistering runner %s before scale-down: %w", rm.Name, err)
			}
		}
	}
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: ptr.To(m.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	// A Machine deleted before Cluster API added its finalizer goes at once and never deletes its
	// MachineClaim and BootstrapConfig; delete them too (Cluster API ignores what is already gone).
	if err := r.deleteRunnerParts(ctx, s.pool.Namespace, rm.Name); err != nil {
		return true, err
	}
	ctrl.LoggerFrom(ctx).Info("removed runner", "Machine", rm.Name, "reason", rm.Reason)
	r.Recorder.Eventf(s.pool, corev1.EventTypeNormal, fleetv1.RunnerRemovedEventReason, "deleted Machine %s: %s", rm.Name, rm.Reason)
	return true, nil
}

// deleteRunnerParts deletes a runner's MachineClaim and BootstrapConfig (named like its Machine).
func (r *Reconciler) deleteRunnerParts(ctx context.Context, namespace, name string) error {
	for _, obj := range []client.Object{
		&infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
	} {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// orphanGrace lets a runner's MachineClaim and BootstrapConfig exist briefly before its Machine.
const orphanGrace = time.Minute

// reconcileOrphans deletes MachineClaims and BootstrapConfigs of the pool that no Machine backs:
// left by a Machine creation that failed after them, or by a Machine deleted before Cluster API
// took charge of it. Without this they would hold their names (and a claim its VM) forever.
func (r *Reconciler) reconcileOrphans(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	listed, err := r.listing(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	backed := map[string]bool{}
	for _, m := range listed.machines {
		backed[m.Name] = true
	}
	var objs []client.Object
	for i := range listed.claims {
		objs = append(objs, &listed.claims[i])
	}
	for i := range listed.configs {
		objs = append(objs, &listed.configs[i])
	}
	for _, o := range objs {
		if backed[o.GetName()] || !o.GetDeletionTimestamp().IsZero() || time.Since(o.GetCreationTimestamp().Time) < orphanGrace ||
			!isOwnedByPool(o, s.pool) {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("deleting runner part no Machine backs", "kind", fmt.Sprintf("%T", o), "name", o.GetName())
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func isOwnedByPool(o client.Object, pool *fleetv1.RunnerPool) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == pool.UID {
			return true
		}
	}
	return false
}

func (r *Reconciler) deregister(ctx context.Context, s *poolScope, name string) error {
	c, scope, err := r.Platforms.Platform(ctx, s.pool)
	if err != nil {
		return err
	}
	return c.RemoveRunnerByName(ctx, scope, name)
}

// waitForCache blocks until the cache shows the Machines just created, the staleness guard
// MachineSet uses: without it a reconcile right after a burst would count too few and create again.
func (r *Reconciler) waitForCache(ctx context.Context, pool *fleetv1.RunnerPool, created []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, name := range created {
		m := &clusterv1.Machine{}
		for {
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, m)
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("Machine %s did not appear in the cache: %w", name, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func policyOf(p *fleetv1.RunnerPool) scaling.Policy {
	pol := scaling.Policy{Min: int(p.Spec.MinReplicas), Max: int(p.Spec.MaxReplicas), Idle: int(p.Spec.IdleReplicas),
		IdleTTL: 30 * time.Minute, MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
	if p.Spec.Replicas != nil {
		pol.Replicas = ptr.To(int(*p.Spec.Replicas))
	}
	if p.Spec.IdleTTL != nil {
		pol.IdleTTL = p.Spec.IdleTTL.Duration
	}
	if p.Spec.MaxLifetime != nil {
		pol.MaxLifetime = p.Spec.MaxLifetime.Duration
	}
	if p.Spec.BootstrapTimeout != nil {
		pol.BootstrapTimeout = p.Spec.BootstrapTimeout.Duration
	}
	pol.Warm, pol.WarmMaxAge = int(p.Spec.WarmReplicas), warmMaxAge(p)
	return pol
}

// merged copies each of more into base, later maps winning, and returns base (made only when
// something is copied into a nil base).
func merged(base map[string]string, more ...map[string]string) map[string]string {
	for _, m := range more {
		if len(m) == 0 {
			continue
		}
		if base == nil {
			base = map[string]string{}
		}
		maps.Copy(base, m)
	}
	return base
}
