package runnerpool

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/scaling"
)

// The warm tier: a RunnerPool keeps spec.warmReplicas runners whose VM is cloned and configured
// but stopped, marked on their MachineClaim (infrav1.WarmAnnotation). A job that finds no idle
// runner starts one of them rather than waiting for a clone. Their BootstrapConfig is held
// (bootstrapv1.WarmHoldAnnotation) until then, so the join token is minted at start.

// warmRunner is what a runner's claim says about the warm tier.
type warmRunner struct {
	// queued: the claim waits in its hypervisor's queue for a clone slot or capacity.
	queued bool
	// cloneStarted is when the claim's latest clone was accepted, if it was.
	cloneStarted *metav1.Time
	held         bool
	// ready: held, and its VM is cloned, configured and stopped (not still being made).
	ready bool
	// started is when the pool started the warm VM (zero: not started, or never warm).
	started time.Time
}

// apply makes a runner's scaling state reflect its claim: one waiting in the hypervisor's queue is
// Queued, and its bootstrap timeout counts from its clone; a held runner is Warm, and a started
// one counts its timeouts from its start, not from its clone.
func (w warmRunner) apply(rn *scaling.Runner) {
	rn.Warm, rn.Queued = w.held, w.queued
	if w.cloneStarted != nil {
		rn.BootingSince, rn.Queued = w.cloneStarted.Time, false
	}
	if !w.started.IsZero() {
		rn.Created, rn.BootingSince = w.started, w.started
	}
}

// claimQueued reports whether c's VM is not being made yet: no clone of it was accepted, so it
// waits for a clone slot, a throttled cluster's backoff or capacity, or has not reached the queue
// yet. A claim cloned by a release that did not record the clone's start is not queued.
func claimQueued(c *infrav1.MachineClaim) bool {
	return c.Status.CloneStartedTime == nil && c.Status.CompletedStep == ""
}

// warmRunners reads the pool's claims, by runner name: their warm marks and whether they still
// wait in the hypervisor's queue.
func (r *Reconciler) warmRunners(ctx context.Context, s *poolScope) (map[string]warmRunner, error) {
	listed, err := r.listing(ctx, s)
	if err != nil {
		return nil, err
	}
	out := map[string]warmRunner{}
	for _, c := range listed.claims {
		out[c.Name] = warmRunner{queued: claimQueued(&c), cloneStarted: c.Status.CloneStartedTime}
		if !infrav1.IsWarm(c.Annotations) {
			continue
		}
		w := out[c.Name]
		w.held = infrav1.IsWarmHeld(c.Annotations)
		w.ready = w.held && c.DeletionTimestamp.IsZero() &&
			conditions.GetReason(&c, infrav1.MachineClaimVMProvisionedCondition) == infrav1.WarmHeldReason
		if t, err := time.Parse(time.RFC3339, c.Annotations[infrav1.WarmStartTimeAnnotation]); err == nil {
			w.started = t
		}
		out[c.Name] = w
	}
	return out, nil
}

// markWarm makes a new runner a warm one: its claim clones and configures the VM and stops there,
// and its config mints no token until the pool starts it.
func markWarm(config *bootstrapv1.BootstrapConfig, claim *infrav1.MachineClaim) {
	if config.Annotations == nil {
		config.Annotations = map[string]string{}
	}
	config.Annotations[bootstrapv1.WarmHoldAnnotation] = "true"
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[infrav1.WarmAnnotation] = infrav1.WarmHeld
}

// startWarmRunners starts the warm runners the plan picked and reports how many it started.
func (r *Reconciler) startWarmRunners(ctx context.Context, s *poolScope) (int, error) {
	started := 0
	for _, name := range s.plan.Start {
		if err := r.startWarm(ctx, s, name); err != nil {
			return started, fmt.Errorf("starting warm runner %s: %w", name, err)
		}
		started++
	}
	if started > 0 {
		return started, r.waitForWarmStarts(ctx, s.pool, s.plan.Start)
	}
	return started, nil
}

// startWarm starts one warm runner: first its BootstrapConfig is released (its join token is
// minted now, valid for the boot only), then its claim is told to deliver the bootstrap data and
// start the VM. In that order, a failure in between leaves a held claim the pool may start again,
// never a started claim whose config stays held.
func (r *Reconciler) startWarm(ctx context.Context, s *poolScope, name string) error {
	config := &bootstrapv1.BootstrapConfig{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.pool.Namespace, Name: name}, config)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case config.Annotations[bootstrapv1.WarmHoldAnnotation] != "":
		patch := client.MergeFromWithOptions(config.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(config.Annotations, bootstrapv1.WarmHoldAnnotation)
		if err := r.Client.Patch(ctx, config, patch); err != nil {
			return fmt.Errorf("releasing the BootstrapConfig: %w", err)
		}
	}
	claim := &infrav1.MachineClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.pool.Namespace, Name: name}, claim); err != nil {
		return err
	}
	if !infrav1.IsWarmHeld(claim.Annotations) {
		return nil
	}
	// The optimistic lock makes a decision taken on a stale copy fail rather than start twice.
	patch := client.MergeFromWithOptions(claim.DeepCopy(), client.MergeFromWithOptimisticLock{})
	claim.Annotations[infrav1.WarmAnnotation] = infrav1.WarmStart
	claim.Annotations[infrav1.WarmStartTimeAnnotation] = time.Now().UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, claim, patch); err != nil {
		return fmt.Errorf("starting the MachineClaim: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("started warm runner", "Machine", name)
	r.Recorder.Eventf(s.pool, corev1.EventTypeNormal, fleetv1.WarmRunnerStartedEventReason, "started warm Machine %s for a queued job", name)
	return nil
}

// waitForWarmStarts blocks until the cache shows the claims just started, so the next reconcile
// neither counts them warm nor refills the tier twice.
func (r *Reconciler) waitForWarmStarts(ctx context.Context, pool *fleetv1.RunnerPool, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, name := range names {
		for {
			claim := &infrav1.MachineClaim{}
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, claim)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err != nil || !infrav1.IsWarmHeld(claim.Annotations) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("MachineClaim %s did not show its start in the cache: %w", name, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// warmMaxAge is spec.warmMaxAge or its default.
func warmMaxAge(p *fleetv1.RunnerPool) time.Duration {
	if p.Spec.WarmMaxAge != nil && p.Spec.WarmMaxAge.Duration > 0 {
		return p.Spec.WarmMaxAge.Duration
	}
	return fleetv1.DefaultWarmMaxAge
}
