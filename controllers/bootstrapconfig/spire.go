package bootstrapconfig

import (
	"context"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// spireRedeemed asks the config's SPIRE server whether an agent attested with its join token.
func (r *Reconciler) spireRedeemed(ctx context.Context, c *bootstrapv1.BootstrapConfig) (bool, error) {
	id, m, err := recordedMachine(c)
	if err != nil || r.SPIREProvisioner == nil || r.SPIREServerAddress == "" {
		return false, err
	}
	p, err := r.provisionerFor(ctx, c)
	if err != nil {
		return false, err
	}
	checker, ok := p.(identity.RedemptionChecker)
	if !ok {
		return false, nil
	}
	return checker.Redeemed(ctx, id.TrustDomain(), m)
}

// recordedMachine is the SPIFFE ID recorded in status and the Machine it names.
func recordedMachine(c *bootstrapv1.BootstrapConfig) (spiffeid.ID, identity.Machine, error) {
	id, err := spiffeid.FromString(c.Status.SPIFFEID)
	if err != nil {
		return spiffeid.ID{}, identity.Machine{}, fmt.Errorf("status.spiffeID: %w", err)
	}
	ns, name, err := identity.ParseMachineID(id.TrustDomain(), id)
	if err != nil {
		return spiffeid.ID{}, identity.Machine{}, fmt.Errorf("status.spiffeID: %w", err)
	}
	return id, identity.Machine{Namespace: ns, Name: name}, nil
}

// releaseSPIRE deletes the entries and agent registered for the SPIFFE ID recorded in status. With
// none recorded nothing was registered; with SPIRE no longer enabled on this manager nothing can be
// done, and the config must not hang on that.
func (r *Reconciler) releaseSPIRE(ctx context.Context, c *bootstrapv1.BootstrapConfig) error {
	if c.Status.SPIFFEID == "" {
		return nil
	}
	if r.SPIREProvisioner == nil || r.SPIREServerAddress == "" {
		r.Recorder.Eventf(c, corev1.EventTypeWarning, bootstrapv1.SPIREReleaseFailedReason,
			"provider SPIRE is not enabled on this manager: the registration entries of %s stay on the SPIRE server", c.Status.SPIFFEID)
		return nil
	}
	id, m, err := recordedMachine(c)
	if err != nil {
		return err
	}
	p, err := r.provisionerFor(ctx, c)
	if err != nil {
		return err
	}
	releaser, ok := p.(identity.Releaser)
	if !ok {
		return nil
	}
	if err := releaser.Release(ctx, id.TrustDomain(), m); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released the machine on the SPIRE server", "spiffeID", id.String())
	return nil
}
