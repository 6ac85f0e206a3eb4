package service

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// target is everything a request from one machine is about.
type target struct {
	id      spiffeid.ID
	machine *clusterv1.Machine
	config  *bootstrapv1.BootstrapConfig
	pool    *fleetv1.RunnerPool
	// cert is the X509-SVID the caller presented, when it came over mTLS.
	cert *x509.Certificate
}

// resolve maps a verified SPIFFE ID to its live Machine, MachineClaim, BootstrapConfig and
// RunnerPool. Anything gone, going, or not issued for exactly this ID is refused with 403, so an
// SVID outlives neither its Machine nor the BootstrapConfig it was issued from.
func (s *Server) resolve(ctx context.Context, id spiffeid.ID) (*target, error) {
	ns, name, err := identity.ParseMachineID(s.td, id)
	if err != nil {
		return nil, refusal(http.StatusForbidden, err)
	}
	t := &target{id: id, machine: &clusterv1.Machine{}, config: &bootstrapv1.BootstrapConfig{}, pool: &fleetv1.RunnerPool{}}
	if err := s.getLive(ctx, client.ObjectKey{Namespace: ns, Name: name}, t.machine, "Machine"); err != nil {
		return nil, err
	}
	ref := t.machine.Spec.Bootstrap.ConfigRef
	if ref.Kind != "BootstrapConfig" || ref.APIGroup != bootstrapv1.GroupVersion.Group {
		return nil, refusal(http.StatusForbidden, fmt.Errorf("machine %s/%s is not bootstrapped by HyperFleet", ns, name))
	}
	if err := s.getLive(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, t.config, "BootstrapConfig"); err != nil {
		return nil, err
	}
	if err := s.attestedHere(t.config, id); err != nil {
		return nil, err
	}
	if infra := t.machine.Spec.InfrastructureRef; infra.Kind == "MachineClaim" && infra.APIGroup == infrav1.GroupVersion.Group {
		if err := s.getLive(ctx, client.ObjectKey{Namespace: ns, Name: infra.Name}, &infrav1.MachineClaim{}, "MachineClaim"); err != nil {
			return nil, err
		}
	}
	poolName := t.machine.Labels[fleetv1.RunnerPoolNameLabel]
	if poolName == "" {
		return nil, refusal(http.StatusNotFound, fmt.Errorf("machine %s/%s belongs to no RunnerPool", ns, name))
	}
	if err := s.opts.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, t.pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refusal(http.StatusNotFound, fmt.Errorf("RunnerPool %s/%s not found", ns, poolName))
		}
		return nil, err
	}
	return t, nil
}

// getLive reads obj and refuses with 403 when it does not exist or is being deleted.
func (s *Server) getLive(ctx context.Context, key client.ObjectKey, obj client.Object, kind string) error {
	if err := s.opts.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return refusal(http.StatusForbidden, fmt.Errorf("%s %s is not live", kind, key))
		}
		return err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return refusal(http.StatusForbidden, fmt.Errorf("%s %s is being deleted", kind, key))
	}
	return nil
}

// attestedHere refuses a caller whose BootstrapConfig does not record an attestation of exactly
// this ID by this service's identity provider: the builtin service redeemed its join token, or,
// for provider SPIRE, HyperFleet registered this ID with the SPIRE server that issued the SVID.
func (s *Server) attestedHere(c *bootstrapv1.BootstrapConfig, id spiffeid.ID) error {
	spire := c.Spec.Attestation.Provider == bootstrapv1.IdentitySPIRE
	switch {
	case c.Status.SPIFFEID != id.String():
		return refusal(http.StatusForbidden, fmt.Errorf("no credential for %s is recorded on its BootstrapConfig", id))
	case s.spire && !spire:
		return refusal(http.StatusForbidden, fmt.Errorf("%s is not attested by SPIRE: its BootstrapConfig names provider %s", id, providerName(c)))
	case !s.spire && spire:
		return refusal(http.StatusForbidden, fmt.Errorf("%s is attested by SPIRE: it is served by the bootstrap service's SPIRE endpoint", id))
	case !s.spire && (c.Status.JoinToken == nil || c.Status.JoinToken.RedeemedTime == nil):
		return refusal(http.StatusForbidden, fmt.Errorf("no attestation of %s is recorded on its BootstrapConfig", id))
	}
	return nil
}

func providerName(c *bootstrapv1.BootstrapConfig) string {
	if p := c.Spec.Attestation.Provider; p != "" {
		return string(p)
	}
	return string(bootstrapv1.IdentityBuiltin)
}
