package runnerpool

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// runnerConfigState is where a runner's one-time config stands when the pool wants it gone.
type runnerConfigState int

const (
	// runnerConfigRetired: never issued, and now it never will be: the runner cannot have registered.
	runnerConfigRetired runnerConfigState = iota
	// runnerConfigIssuing: the bootstrap service is registering the runner with the CI platform.
	runnerConfigIssuing
	// runnerConfigIssued: the runner registered and may be running a job; ask the platform.
	runnerConfigIssued
)

// issuingGrace is how long a runner config counts as being issued: longer than the bootstrap
// service spends on one request.
const issuingGrace = 2 * time.Minute

// maxRetireAttempts bounds the optimistic-concurrency retries against the bootstrap service.
const maxRetireAttempts = 3

// retire makes sure a runner about to be removed can no longer register with the CI platform, or
// learns that it may have. It marks the runner's BootstrapConfig retired with the resourceVersion it
// read, as the bootstrap service claims the runner config: whichever writes first wins, so a runner
// never registers (and takes a job) after the pool decided it was unregistered.
func (r *Reconciler) retire(ctx context.Context, m *clusterv1.Machine) (runnerConfigState, error) {
	ref := m.Spec.Bootstrap.ConfigRef
	if ref.Kind != "BootstrapConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group {
		return runnerConfigIssued, nil // not ours to reason about: ask the platform
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	for range maxRetireAttempts {
		config := &bootstrapv1.BootstrapConfig{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, config)
		switch {
		case apierrors.IsNotFound(err):
			return runnerConfigRetired, nil // the service refuses a Machine without its config
		case err != nil:
			return 0, err
		case config.Status.AttestedTime != nil:
			return runnerConfigIssued, nil
		case config.Status.RunnerConfigTime != nil && time.Since(config.Status.RunnerConfigTime.Time) < issuingGrace:
			return runnerConfigIssuing, nil
		case config.Status.RunnerConfigTime != nil:
			// Issued, though its completion was never recorded: the platform knows.
			return runnerConfigIssued, nil
		case config.Annotations[bootstrapv1.RunnerRetiredAnnotation] != "":
			return runnerConfigRetired, nil
		}
		if config.Annotations == nil {
			config.Annotations = map[string]string{}
		}
		config.Annotations[bootstrapv1.RunnerRetiredAnnotation] = "true"
		err = r.Client.Update(ctx, config) // with the resourceVersion read: fails if the service claimed meanwhile
		switch {
		case err == nil:
			return runnerConfigRetired, nil
		case apierrors.IsNotFound(err):
			return runnerConfigRetired, nil
		case !apierrors.IsConflict(err):
			return 0, err
		}
	}
	return 0, fmt.Errorf("retiring the runner config of Machine %s: too much contention", m.Name)
}
