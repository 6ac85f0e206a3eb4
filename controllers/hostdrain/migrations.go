package hostdrain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// nextDrainPass is how long an unfinished drain waits before it looks again unwoken: until the
// next retry of a failed migration, at most drainRecheck.
func nextDrainPass(drains []hostDrain, now time.Time) time.Duration {
	wait := drainRecheck
	for _, d := range drains {
		if !d.retryAt.IsZero() {
			wait = min(wait, max(d.retryAt.Sub(now), time.Second))
		}
	}
	return wait
}

// retryFailed records in d the VM of claim c whose last drain migration m failed, and says
// whether its next attempt is due: after a backoff that grows with each failed attempt, and never
// once the last attempt failed.
func (r *Reconciler) retryFailed(d *hostDrain, c *infrav1.MachineClaim, m *fleetv1.MachineMigration, now time.Time) (due bool) {
	attempt := drainAttempt(m)
	failedAt := now
	if m.Status.EndTime != nil {
		failedAt = m.Status.EndTime.Time
	}
	f := infrav1.DrainMigrationFailure{MachineClaim: c.Name, Attempts: int32(attempt), LastFailure: condition.Truncate(m.Status.Error, 1024),
		LastFailureTime: &metav1.Time{Time: failedAt}}
	next, giveUp := d.retry.Next(attempt, failedAt)
	switch {
	case giveUp:
		d.gaveUp = append(d.gaveUp, fmt.Sprintf("%s: %d migration(s) failed, the last (MachineMigration %s): %s; delete it to try again",
			c.Name, attempt, m.Name, m.Status.Error))
	case next.After(now):
		f.NextAttemptTime = &metav1.Time{Time: next}
		if d.retryAt.IsZero() || next.Before(d.retryAt) {
			d.retryAt = next
		}
	default:
		f.NextAttemptTime = &metav1.Time{Time: now}
		due = true
	}
	d.status.FailedMigrations = append(d.status.FailedMigrations, f)
	return due
}

// drainAttempt is which attempt of its VM's drain m is, 1 for a migration without the annotation.
func drainAttempt(m *fleetv1.MachineMigration) int {
	if n, err := strconv.Atoi(m.Annotations[fleetv1.DrainAttemptAnnotation]); err == nil && n > 0 {
		return n
	}
	return 1
}

// drainMigrationName is the name of the attempt-th MachineMigration that moves claim off host:
// one name per attempt, so a stale cache cannot create a second migration for the same attempt.
func drainMigrationName(host, claim string, attempt int) string {
	name := "drain-" + strings.ToLower(host) + "-" + claim
	if attempt > 1 {
		name += "-retry" + strconv.Itoa(attempt)
	}
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:240] + "-" + hex.EncodeToString(sum[:])[:12]
}

// createMigration creates the attempt-th MachineMigration that moves claim's VM from host to
// target, owned by the HypervisorCluster and labelled with the host. A finished one of the same
// name, left by an earlier maintenance of the host, is deleted first; once the new one exists the
// finished attempts before it go, so only the last failure is kept.
func (r *Reconciler) createMigration(ctx context.Context, hc *infrav1.HypervisorCluster, host string, claim *infrav1.MachineClaim, target string,
	attempt int, migrations []fleetv1.MachineMigration) error {
	m := &fleetv1.MachineMigration{
		ObjectMeta: metav1.ObjectMeta{Name: drainMigrationName(host, claim.Name, attempt), Namespace: hc.Namespace,
			Labels:      map[string]string{fleetv1.DrainHostLabel: host, fleetv1.DrainHypervisorClusterLabel: hc.Name},
			Annotations: map[string]string{fleetv1.DrainAttemptAnnotation: strconv.Itoa(attempt)}},
		Spec: fleetv1.MachineMigrationSpec{MachineClaimName: claim.Name, Target: target, WithLocalDisks: claim.Spec.Migration().AllowLocalDisks},
	}
	if err := controllerutil.SetControllerReference(hc, m, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		old := &fleetv1.MachineMigration{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), old); err != nil {
			return client.IgnoreNotFound(err)
		}
		// Only a move that ended a while ago is history: a recent one means the cache has not
		// shown the claim on its new host yet.
		if old.Status.Phase == fleetv1.MachineMigrationPhaseSucceeded && old.Status.EndTime != nil && time.Since(old.Status.EndTime.Time) > time.Minute {
			return client.IgnoreNotFound(r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}))
		}
		return nil
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("moving %s off host %s (maintenance) to %s: MachineMigration %s", claim.Name, host, target, m.Name)
	if attempt > 1 {
		msg += fmt.Sprintf(", attempt %d of %d", attempt, drainRetryOf(hc).MaxAttempts())
	}
	ctrl.LoggerFrom(ctx).Info(msg)
	r.Recorder.Event(hc, corev1.EventTypeNormal, infrav1.DrainMigrationEventReason, msg)
	var errs []error
	for i := range migrations {
		old := &migrations[i]
		if old.Labels[fleetv1.DrainHostLabel] != host || old.Spec.MachineClaimName != claim.Name || old.Name == m.Name ||
			migrationPending(old) || !old.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting MachineMigration %s, an earlier attempt: %w", old.Name, err))
		}
	}
	return kerrors.NewAggregate(errs)
}

// forgetDrains deletes the finished drain MachineMigrations off hosts no longer drained (their
// maintenance lifted and no move of theirs under way): the drain is over, and a later maintenance
// of the host starts afresh, its VMs' failed attempts forgotten.
func (r *Reconciler) forgetDrains(ctx context.Context, drained []string, migrations []fleetv1.MachineMigration) error {
	var errs []error
	for i := range migrations {
		m := &migrations[i]
		if slices.Contains(drained, m.Labels[fleetv1.DrainHostLabel]) || migrationPending(m) || !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting MachineMigration %s of a finished drain: %w", m.Name, err))
		}
	}
	return kerrors.NewAggregate(errs)
}

// drainRetryOf is the HypervisorCluster's spec.drainPolicy for placement.DrainRetry; unset fields
// (and an unset policy) take DrainRetry's defaults, which the API's defaults repeat.
func drainRetryOf(hc *infrav1.HypervisorCluster) placement.DrainRetry {
	p := hc.Spec.DrainPolicy
	if p == nil {
		return placement.DrainRetry{}
	}
	return placement.DrainRetry{Initial: time.Duration(p.RetryInitialSeconds) * time.Second,
		Max: time.Duration(p.RetryMaxSeconds) * time.Second, Attempts: int(p.MaxAttempts)}
}
