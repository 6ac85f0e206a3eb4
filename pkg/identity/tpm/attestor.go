package tpm

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
)

// Defaults of an Attestor.
const (
	// DefaultChallengeTTL is how long a VM has to answer its credential challenge: one TPM command.
	DefaultChallengeTTL = 2 * time.Minute
	// DefaultSVIDTTL matches the builtin attestor's.
	DefaultSVIDTTL = time.Hour
)

// EKSHA256Annotation on a BootstrapConfig enrols its VM's endorsement key: when set, only a TPM whose
// EK public key (PKIX DER) has this hex SHA-256 can attest, checked at both steps. Without it any
// TPM can, as long as it holds the join token.
const EKSHA256Annotation = "bootstrap.hyperfleet.io/tpm-ek-sha256"

const (
	challengeIDPrefix = "hftc"
	maxRedeemAttempts = 5
)

// Challenge is what the VM's TPM must answer: TPM2_ActivateCredential of CredentialBlob and
// EncryptedSecret yields the secret to send back with ID.
type Challenge struct {
	ID              string
	CredentialBlob  []byte
	EncryptedSecret []byte
	ExpiresAt       time.Time
	// State is sealed for this service alone; the VM sends it back with its answer.
	State []byte
}

// Attestor attests VMs by join token plus TPM (method TPM, builtin CA) in two steps: Challenge
// redeems the token once and encrypts a secret to the VM's TPM; Activate takes the decrypted
// secret back and issues the SVID. Between them, the state travels with the VM, sealed with a key
// derived from the CA key, so the two steps may reach different replicas (or a restarted service),
// nothing is stored that a dead VM could leave behind, and nobody without the CA key can read or
// forge it. The BootstrapConfig's status records the activation, so the answer is single-use.
type Attestor struct {
	// Client must read from the API server directly, as for the builtin attestor.
	Client client.Client
	CA     *identity.CA
	// EKRoots, when set, verifies EK certificates: a VM that presents one must present one that
	// chains to these roots (the TPM manufacturers' CAs) and certifies its EK.
	EKRoots *x509.CertPool
	// RequireEKCertificate refuses TPMs without such a certificate; it needs EKRoots.
	RequireEKCertificate bool
	// SVIDTTL defaults to DefaultSVIDTTL; ChallengeTTL to DefaultChallengeTTL.
	SVIDTTL      time.Duration
	ChallengeTTL time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Challenge checks ev, redeems joinToken and returns the credential challenge. Evidence is checked
// before the token is redeemed, so malformed evidence does not burn it.
func (a *Attestor) Challenge(ctx context.Context, joinToken string, ev *protocol.TPMEvidence) (*Challenge, error) {
	ref, err := identity.ParseJoinToken(joinToken)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	csr, err := identity.ParseCSRPEM(ev.CSR)
	if err != nil {
		return nil, fmt.Errorf("%w: csr: %v", identity.ErrBadRequest, err)
	}
	if a.RequireEKCertificate && a.EKRoots == nil {
		return nil, errors.New("TPM attestor needs EK roots when EK certificates are required")
	}
	v, err := verifyEvidence(ev, joinToken, csr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	if err := a.verifyEKCertificate(ev.EKCertificate, v); err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	for range maxRedeemAttempts {
		bc, id, err := a.redeem(ctx, ref, joinToken, v)
		if apierrors.IsConflict(err) {
			continue // another request wrote the BootstrapConfig: read again and decide again
		}
		if err != nil {
			return nil, err
		}
		return a.newChallenge(bc, id, v, ev.CSR)
	}
	return nil, fmt.Errorf("redeeming join token for %s/%s: too much contention", ref.Namespace, ref.Name)
}

// redeem checks the token (for a TPM-method config whose enrolled EK, if any, is this TPM's) and
// marks it redeemed, with the checks every method shares.
func (a *Attestor) redeem(ctx context.Context, ref identity.JoinTokenRef, token string, v *verified) (*bootstrapv1.BootstrapConfig, spiffeid.ID, error) {
	ekPinned := func(bc *bootstrapv1.BootstrapConfig) error {
		if want := bc.Annotations[EKSHA256Annotation]; want != "" && !strings.EqualFold(want, v.ekSHA256) {
			return fmt.Errorf("%w: the TPM's endorsement key is not the one enrolled for BootstrapConfig %s/%s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
		}
		return nil
	}
	r, err := builtin.CheckJoinToken(ctx, a.Client, a.CA.TrustDomain(), a.now(), ref, token, bootstrapv1.AttestationTPM, ekPinned)
	if err != nil {
		return nil, spiffeid.ID{}, err
	}
	if err := builtin.MarkRedeemed(ctx, a.Client, r, a.now(), "join token redeemed; waiting for the VM's TPM to answer the credential challenge"); err != nil {
		return nil, spiffeid.ID{}, err
	}
	return r.Config, r.ID, nil
}

// liveMachineID is the SPIFFE ID recorded for bc, provided its Machine is live and matches it.
func (a *Attestor) liveMachineID(ctx context.Context, bc *bootstrapv1.BootstrapConfig) (spiffeid.ID, error) {
	return builtin.LiveMachineID(ctx, a.Client, a.CA.TrustDomain(), bc)
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

func (a *Attestor) challengeTTL() time.Duration {
	if a.ChallengeTTL > 0 {
		return a.ChallengeTTL
	}
	return DefaultChallengeTTL
}
