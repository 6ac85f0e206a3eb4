package builtin

import (
	"context"
	"fmt"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// Redemption is a BootstrapConfig whose join token may be redeemed now, with the SPIFFE ID of its
// live Machine. Config keeps the resourceVersion it was read at.
type Redemption struct {
	Config *bootstrapv1.BootstrapConfig
	ID     spiffeid.ID
	// Machine names the Machine, its BootstrapConfig and namespace.
	Machine identity.Machine
}

// CheckJoinToken reads the BootstrapConfig a join token names and checks, in this order: the token
// is the one recorded, the config uses method (an empty method counts as JoinToken), the token is
// neither redeemed nor expired, extra (when set) accepts the config, and its Machine is live with
// the SPIFFE ID recorded for it in trust domain td. Every attestation method redeems through it.
func CheckJoinToken(ctx context.Context, c client.Client, td spiffeid.TrustDomain, now time.Time,
	ref identity.JoinTokenRef, token string, method bootstrapv1.AttestationMethod,
	extra func(*bootstrapv1.BootstrapConfig) error) (*Redemption, error) {
	bc := &bootstrapv1.BootstrapConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: unknown join token", identity.ErrInvalidEvidence)
		}
		return nil, err
	}
	configured := bc.Spec.Attestation.Method
	if configured == "" {
		configured = bootstrapv1.AttestationJoinToken
	}
	jt := bc.Status.JoinToken
	switch {
	case jt == nil || !identity.JoinTokenMatches(token, jt.SHA256):
		return nil, fmt.Errorf("%w: unknown join token", identity.ErrInvalidEvidence)
	case configured != method:
		// Otherwise the token alone would do for a config that also asks for TPM proof.
		return nil, fmt.Errorf("%w: BootstrapConfig %s/%s requires %s attestation", identity.ErrInvalidEvidence, bc.Namespace, bc.Name, configured)
	case jt.RedeemedTime != nil:
		return nil, fmt.Errorf("%w: join token was redeemed at %s", identity.ErrAlreadyRedeemed, jt.RedeemedTime.UTC().Format(time.RFC3339))
	case bc.Status.TokenExpirationTime == nil || !now.Before(bc.Status.TokenExpirationTime.Time):
		return nil, fmt.Errorf("%w: join token expired", identity.ErrExpired)
	}
	if extra != nil {
		if err := extra(bc); err != nil {
			return nil, err
		}
	}
	machine, id, err := liveMachine(ctx, c, td, bc)
	if err != nil {
		return nil, err
	}
	return &Redemption{Config: bc, ID: id,
		Machine: identity.Machine{Namespace: machine.Namespace, Name: machine.Name, BootstrapConfig: bc.Name}}, nil
}

// LiveMachineID is the SPIFFE ID recorded for bc, provided its Machine is live and the ID is that
// Machine's in trust domain td.
func LiveMachineID(ctx context.Context, c client.Client, td spiffeid.TrustDomain, bc *bootstrapv1.BootstrapConfig) (spiffeid.ID, error) {
	_, id, err := liveMachine(ctx, c, td, bc)
	return id, err
}

func liveMachine(ctx context.Context, c client.Client, td spiffeid.TrustDomain, bc *bootstrapv1.BootstrapConfig) (*clusterv1.Machine, spiffeid.ID, error) {
	machine, err := util.GetOwnerMachine(ctx, c, bc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, spiffeid.ID{}, err
	}
	if machine == nil || !machine.DeletionTimestamp.IsZero() || !bc.DeletionTimestamp.IsZero() {
		return nil, spiffeid.ID{}, fmt.Errorf("%w: Machine of BootstrapConfig %s/%s is gone or being deleted", identity.ErrNotLive, bc.Namespace, bc.Name)
	}
	id, err := spiffeid.FromString(bc.Status.SPIFFEID)
	if err != nil || id.TrustDomain() != td {
		return nil, spiffeid.ID{}, fmt.Errorf("%w: BootstrapConfig %s/%s has no SPIFFE ID in trust domain %s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name, td)
	}
	if want, _ := identity.MachineID(id.TrustDomain(), machine.Namespace, machine.Name); want != id {
		return nil, spiffeid.ID{}, fmt.Errorf("%w: BootstrapConfig %s/%s was issued for %s, not Machine %s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name, id, machine.Name)
	}
	return machine, id, nil
}

// MarkRedeemed records the redemption. The status Update carries the resourceVersion CheckJoinToken
// read, so of two concurrent redemptions of one token only one succeeds: the single-use guarantee.
func MarkRedeemed(ctx context.Context, c client.Client, r *Redemption, now time.Time, message string) error {
	bc := r.Config
	t := metav1.NewTime(now)
	bc.Status.JoinToken.RedeemedTime = &t
	conditions.Set(bc, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
		Reason: bootstrapv1.TokenRedeemedReason, Message: message, ObservedGeneration: bc.Generation})
	return c.Status().Update(ctx, bc)
}
