package builtin

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// DefaultSVIDTTL is how long an issued machine SVID lives: long enough to fetch the runner config
// and deregister after an idle timeout, short enough to be useless soon after the VM is gone.
const DefaultSVIDTTL = time.Hour

// maxRedeemAttempts bounds the optimistic-concurrency retries of one redemption.
const maxRedeemAttempts = 5

// Attestor redeems builtin join tokens. The redemption is an update of the BootstrapConfig's
// status carrying the resourceVersion read, so of two concurrent redemptions (on any replicas) the
// API server lets exactly one through; the other re-reads, sees the token redeemed and fails.
type Attestor struct {
	// Client must read from the API server directly: a cache could show a redeemed token as fresh.
	Client client.Client
	CA     *identity.CA
	// SVIDTTL defaults to DefaultSVIDTTL.
	SVIDTTL time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

var _ identity.Attestor = (*Attestor)(nil)

// Attest redeems ev.JoinToken once and signs ev.CSR for the token's Machine.
func (a *Attestor) Attest(ctx context.Context, ev identity.Evidence) (*identity.Attested, error) {
	ref, err := identity.ParseJoinToken(ev.JoinToken)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	if err := identity.CheckCSR(ev.CSR); err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrBadRequest, err)
	}
	for range maxRedeemAttempts {
		attested, err := a.redeem(ctx, ref, ev.JoinToken)
		if apierrors.IsConflict(err) {
			continue // someone else wrote the BootstrapConfig: read again and decide again
		}
		if err != nil {
			return nil, err
		}
		chain, err := a.CA.SignCSR(ev.CSR, attested.ID, a.svidTTL())
		if err != nil {
			return nil, fmt.Errorf("signing SVID for %s: %w", attested.ID, err)
		}
		attested.Chain = chain
		return attested, nil
	}
	return nil, fmt.Errorf("redeeming join token for %s/%s: too much contention", ref.Namespace, ref.Name)
}

// redeem checks the token against its BootstrapConfig and marks it redeemed.
func (a *Attestor) redeem(ctx context.Context, ref identity.JoinTokenRef, token string) (*identity.Attested, error) {
	r, err := CheckJoinToken(ctx, a.Client, a.CA.TrustDomain(), a.now(), ref, token, bootstrapv1.AttestationJoinToken, nil)
	if err != nil {
		return nil, err
	}
	if err := MarkRedeemed(ctx, a.Client, r, a.now(), "join token redeemed; waiting for the VM to fetch its runner config"); err != nil {
		return nil, err
	}
	return &identity.Attested{ID: r.ID, Machine: r.Machine}, nil
}

func (a *Attestor) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Attestor) svidTTL() time.Duration {
	if a.SVIDTTL > 0 {
		return a.SVIDTTL
	}
	return DefaultSVIDTTL
}
