package tpm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// EK public key (PKIX DER) has this hex SHA-256 can attest. Without it any TPM can, as long as it
// holds the join token.
const EKSHA256Annotation = "bootstrap.hyperfleet.io/tpm-ek-sha256"

// ChallengeSecretType marks the Secrets that hold a challenge between its two steps.
const ChallengeSecretType corev1.SecretType = "bootstrap.hyperfleet.io/tpm-challenge"

// Keys of a challenge Secret.
const (
	keyChallengeID  = "challenge-id"
	keySecretSHA256 = "secret-sha256"
	keyCSR          = "csr"
	keySPIFFEID     = "spiffe-id"
	keyExpiresAt    = "expires-at"
	keyEKSHA256     = "ek-sha256"
)

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
}

// Attestor attests VMs by join token plus TPM (method TPM, builtin CA) in two steps: Challenge
// redeems the token once and encrypts a secret to the VM's TPM; Activate takes the decrypted
// secret back and issues the SVID. Between them, the state lives in a Secret next to the
// BootstrapConfig, so the two steps may reach different replicas.
type Attestor struct {
	// Client must read from the API server directly, as for the builtin attestor.
	Client client.Client
	CA     *identity.CA
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
	v, err := verifyEvidence(ev, joinToken, csr)
	if err != nil {
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
		return a.storeChallenge(ctx, bc, id, v, ev.CSR)
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

// storeChallenge makes the challenge and records what Activate needs in the challenge Secret. The
// token was just redeemed by this request alone, so any Secret already there is stale.
func (a *Attestor) storeChallenge(ctx context.Context, bc *bootstrapv1.BootstrapConfig, id spiffeid.ID, v *verified, csrPEM []byte) (*Challenge, error) {
	secret, blob, enc, err := makeCredential(v)
	if err != nil {
		return nil, fmt.Errorf("making the credential challenge: %w", err)
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ch := &Challenge{
		ID:              strings.Join([]string{challengeIDPrefix, bc.Namespace, bc.Name, hex.EncodeToString(nonce)}, "_"),
		CredentialBlob:  blob,
		EncryptedSecret: enc,
		ExpiresAt:       a.now().Add(a.challengeTTL()).UTC().Truncate(time.Second),
	}
	sum := sha256.Sum256(secret)
	data := map[string][]byte{
		keyChallengeID:  []byte(ch.ID),
		keySecretSHA256: []byte(hex.EncodeToString(sum[:])),
		keyCSR:          csrPEM,
		keySPIFFEID:     []byte(id.String()),
		keyExpiresAt:    []byte(ch.ExpiresAt.Format(time.RFC3339)),
		keyEKSHA256:     []byte(v.ekSHA256),
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: bc.Namespace, Name: challengeSecretName(bc.Name),
		Labels: map[string]string{"app.kubernetes.io/part-of": "hyperfleet", "app.kubernetes.io/component": "tpm-challenge"},
		// Garbage-collected with the BootstrapConfig if the VM never answers.
		OwnerReferences: []metav1.OwnerReference{{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "BootstrapConfig",
			Name: bc.Name, UID: bc.UID}}},
		Type: ChallengeSecretType, Data: data}
	err = a.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		if err = a.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err == nil {
			s.Data = data
			err = a.Client.Update(ctx, s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("recording the credential challenge: %w", err)
	}
	return ch, nil
}

// Activate checks the answer to a challenge, once, and signs the CSR that came with it. A wrong
// answer ends the challenge: the VM has no second try, as with the join token.
func (a *Attestor) Activate(ctx context.Context, challengeID string, answer []byte) (*identity.Attested, error) {
	parts := strings.Split(challengeID, "_")
	if len(parts) != 4 || parts[0] != challengeIDPrefix || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("%w: malformed challenge ID", identity.ErrInvalidEvidence)
	}
	s := &corev1.Secret{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: parts[1], Name: challengeSecretName(parts[2])}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
		}
		return nil, err
	}
	if s.Type != ChallengeSecretType || subtle.ConstantTimeCompare(s.Data[keyChallengeID], []byte(challengeID)) != 1 {
		return nil, fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
	}
	expires, err := time.Parse(time.RFC3339, string(s.Data[keyExpiresAt]))
	if err != nil || !a.now().Before(expires) {
		a.endChallenge(ctx, s)
		return nil, fmt.Errorf("%w: credential challenge expired", identity.ErrExpired)
	}
	sum := sha256.Sum256(answer)
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), s.Data[keySecretSHA256]) != 1 {
		a.endChallenge(ctx, s)
		return nil, fmt.Errorf("%w: wrong answer to the credential challenge", identity.ErrInvalidEvidence)
	}
	bc := &bootstrapv1.BootstrapConfig{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: parts[1], Name: parts[2]}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: BootstrapConfig %s/%s is gone", identity.ErrNotLive, parts[1], parts[2])
		}
		return nil, err
	}
	id, err := a.liveMachineID(ctx, bc)
	if err != nil {
		return nil, err
	}
	if id.String() != string(s.Data[keySPIFFEID]) {
		return nil, fmt.Errorf("%w: BootstrapConfig %s/%s changed identity during the challenge", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
	}
	csr, err := identity.ParseCSRPEM(s.Data[keyCSR])
	if err != nil {
		return nil, fmt.Errorf("stored CSR: %w", err)
	}
	// Deleting what we read, and only that, makes the answer single-use across replicas.
	uid, rv := s.UID, s.ResourceVersion
	if err := a.Client.Delete(ctx, s, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: credential challenge already answered", identity.ErrAlreadyRedeemed)
		}
		return nil, err
	}
	chain, err := a.CA.SignCSR(csr, id, a.svidTTL())
	if err != nil {
		return nil, fmt.Errorf("signing SVID for %s: %w", id, err)
	}
	ns, name, _ := identity.ParseMachineID(id.TrustDomain(), id)
	return &identity.Attested{ID: id, Machine: identity.Machine{Namespace: ns, Name: name, BootstrapConfig: bc.Name}, Chain: chain}, nil
}

// endChallenge deletes a failed challenge, best effort: it expires unanswerable anyway.
func (a *Attestor) endChallenge(ctx context.Context, s *corev1.Secret) {
	uid := s.UID
	_ = a.Client.Delete(context.WithoutCancel(ctx), s, client.Preconditions{UID: &uid})
}

// challengeSecretName is the Secret holding a BootstrapConfig's pending challenge.
func challengeSecretName(bootstrapConfig string) string { return bootstrapConfig + "-tpm-challenge" }

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
