package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// Attestation errors, classified so the bootstrap service can answer with the right status code.
var (
	// ErrInvalidEvidence: unknown, malformed or wrong token (401).
	ErrInvalidEvidence = errors.New("invalid attestation evidence")
	// ErrAlreadyRedeemed: the single-use evidence was used before (409).
	ErrAlreadyRedeemed = errors.New("attestation evidence already redeemed")
	// ErrExpired: the evidence outlived its TTL (410).
	ErrExpired = errors.New("attestation evidence expired")
	// ErrNotLive: the evidence is genuine but its Machine is gone or going (403).
	ErrNotLive = errors.New("machine is not live")
	// ErrBadRequest: the request itself is malformed, e.g. a bad CSR (400).
	ErrBadRequest = errors.New("bad attestation request")
)

// Machine names the Cluster API Machine a credential is for.
type Machine struct {
	Namespace string
	Name      string
	// BootstrapConfig is the name of the Machine's BootstrapConfig.
	BootstrapConfig string
}

// Credential is what a VM's bootstrap data carries to prove who it is.
type Credential struct {
	// ID is the SPIFFE ID the VM will hold once attested.
	ID spiffeid.ID
	// JoinToken is the single-use token the VM presents; empty for TPM attestation.
	JoinToken string
	// ExpiresAt is when the token stops being redeemable.
	ExpiresAt time.Time
	// TokenHash is what the API server keeps to redeem the token itself (builtin); empty when an
	// external server (SPIRE) keeps the token.
	TokenHash string
}

// Provisioner mints a Machine's attestation credential when its bootstrap data is rendered. The
// builtin provisioner makes a join token the bootstrap service redeems; a SPIRE provisioner would
// call CreateJoinToken on the SPIRE server; a TPM provisioner would return no token at all.
type Provisioner interface {
	// Provision returns a fresh credential for m, valid for ttl. It must not persist anything the
	// caller has not persisted: the controller records TokenHash in the API server before it
	// writes the token into the data Secret, so a token that reaches a VM is always redeemable.
	Provision(ctx context.Context, td spiffeid.TrustDomain, m Machine, ttl time.Duration) (Credential, error)
	// TrustBundlePEM is the CA bundle VMs use to verify the bootstrap service (and each other).
	TrustBundlePEM(ctx context.Context) ([]byte, error)
}

// Releaser is implemented by provisioners that keep state outside the API server for a Machine
// (SPIRE's registration entries and attested agent): Release removes it once the Machine is gone.
type Releaser interface {
	Release(ctx context.Context, td spiffeid.TrustDomain, m Machine) error
}

// RedemptionChecker is implemented by provisioners whose tokens an external server redeems (SPIRE):
// Redeemed tells whether the agent holding m's token has attested.
type RedemptionChecker interface {
	Redeemed(ctx context.Context, td spiffeid.TrustDomain, m Machine) (bool, error)
}

// Evidence is what a VM presents to attest.
type Evidence struct {
	// JoinToken for join-token attestation.
	JoinToken string
	// CSR carries the public key of the key pair the VM generated; the VM's key never leaves it.
	CSR *x509.CertificateRequest
}

// Attested is the outcome of a successful attestation.
type Attested struct {
	ID      spiffeid.ID
	Machine Machine
	// Chain is the issued X509-SVID, leaf first.
	Chain []*x509.Certificate
}

// Attestor verifies evidence exactly once and issues the caller's X509-SVID. Errors wrap the
// Err* classes above.
type Attestor interface {
	Attest(ctx context.Context, ev Evidence) (*Attested, error)
}
