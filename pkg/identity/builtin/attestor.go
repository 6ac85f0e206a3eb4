package builtin

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

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
	bc := &bootstrapv1.BootstrapConfig{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: unknown join token", identity.ErrInvalidEvidence)
		}
		return nil, err
	}
	jt := bc.Status.JoinToken
	switch {
	case jt == nil || !identity.JoinTokenMatches(token, jt.SHA256):
		return nil, fmt.Errorf("%w: unknown join token", identity.ErrInvalidEvidence)
	case jt.RedeemedTime != nil:
		return nil, fmt.Errorf("%w: join token was redeemed at %s", identity.ErrAlreadyRedeemed, jt.RedeemedTime.UTC().Format(time.RFC3339))
	case bc.Status.TokenExpirationTime == nil || !a.now().Before(bc.Status.TokenExpirationTime.Time):
		return nil, fmt.Errorf("%w: join token expired", identity.ErrExpired)
	}
	machine, err := util.GetOwnerMachine(ctx, a.Client, bc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if machine == nil || !machine.DeletionTimestamp.IsZero() || !bc.DeletionTimestamp.IsZero() {
		return nil, fmt.Errorf("%w: Machine of BootstrapConfig %s/%s is gone or being deleted", identity.ErrNotLive, bc.Namespace, bc.Name)
	}
	id, err := spiffeid.FromString(bc.Status.SPIFFEID)
	if err != nil || id.TrustDomain() != a.CA.TrustDomain() {
		return nil, fmt.Errorf("%w: BootstrapConfig %s/%s has no SPIFFE ID in trust domain %s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name, a.CA.TrustDomain())
	}
	if want, _ := identity.MachineID(id.TrustDomain(), machine.Namespace, machine.Name); want != id {
		return nil, fmt.Errorf("%w: BootstrapConfig %s/%s was issued for %s, not Machine %s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name, id, machine.Name)
	}
	now := metav1.NewTime(a.now())
	bc.Status.JoinToken.RedeemedTime = &now
	conditions.Set(bc, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
		Reason: bootstrapv1.TokenRedeemedReason, Message: "join token redeemed; waiting for the VM to fetch its runner config",
		ObservedGeneration: bc.Generation})
	// Update (not patch) sends the resourceVersion read above: the single-use guarantee.
	if err := a.Client.Status().Update(ctx, bc); err != nil {
		return nil, err
	}
	return &identity.Attested{ID: id, Machine: identity.Machine{Namespace: machine.Namespace, Name: machine.Name, BootstrapConfig: bc.Name}}, nil
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
