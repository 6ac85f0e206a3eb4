package tpm

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// CredentialActivatedReason is the Attested condition's reason once a VM's TPM answered its
// credential challenge and received its SVID: the record that makes the answer single-use.
const CredentialActivatedReason = "TPMCredentialActivated"

// Sealing of the challenge state the VM carries between the two steps.
const (
	// sealKeyLabel names the key, derived from the CA key, that seals challenge state. No other
	// key is derived with it.
	sealKeyLabel = "tpm-challenge seal"
	// sealInfo is the HKDF info and the AEAD's additional data: version 1 of the sealed format.
	sealInfo     = "hyperfleet tpm-challenge state v1"
	sealVersion  = 1
	sealNonceLen = 12
	// MaxSealedState bounds the challenge state an activation may carry; real state is about 1 KiB.
	MaxSealedState = 8 << 10
)

// challengeState is what Activate needs from Challenge. It travels sealed (AES-256-GCM under a key
// only the CA key yields) through the VM: nobody else can read it (it holds the expected answer)
// or forge it, and every replica, restarted or not, can open it.
type challengeState struct {
	ID          string    `json:"id"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	UID         string    `json:"uid"`
	TokenSHA256 string    `json:"tokenSHA256"` // the join token this challenge redeemed
	EKSHA256    string    `json:"ekSHA256"`
	AKName      []byte    `json:"akName"`
	CSR         []byte    `json:"csr"`
	SPIFFEID    string    `json:"spiffeID"`
	Secret      []byte    `json:"secret"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// ParseChallengeID returns the BootstrapConfig a challenge ID names: hftc_<namespace>_<name>_<32
// hex digits>. It proves nothing; the sealed challenge state decides.
func ParseChallengeID(id string) (namespace, name string, err error) {
	parts := strings.Split(id, "_")
	if len(parts) != 4 || parts[0] != challengeIDPrefix || parts[1] == "" || parts[2] == "" || len(parts[3]) != 32 {
		return "", "", errors.New("malformed challenge ID")
	}
	if _, err := hex.DecodeString(parts[3]); err != nil {
		return "", "", errors.New("malformed challenge ID")
	}
	return parts[1], parts[2], nil
}

// newChallenge makes the challenge and seals what Activate needs into it. Nothing is stored: the
// redeemed join token (recorded by redeem) is the only state until the answer comes back.
func (a *Attestor) newChallenge(bc *bootstrapv1.BootstrapConfig, id spiffeid.ID, v *verified, csrPEM []byte) (*Challenge, error) {
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
	ch.State, err = a.seal(&challengeState{ID: ch.ID, Namespace: bc.Namespace, Name: bc.Name, UID: string(bc.UID),
		TokenSHA256: bc.Status.JoinToken.SHA256, EKSHA256: v.ekSHA256, AKName: v.akName, CSR: csrPEM,
		SPIFFEID: id.String(), Secret: secret, ExpiresAt: ch.ExpiresAt})
	if err != nil {
		return nil, fmt.Errorf("sealing the credential challenge: %w", err)
	}
	return ch, nil
}

// Activate checks the answer to a challenge and signs the CSR sealed in its state, once: the
// activation is recorded in the BootstrapConfig's status with optimistic concurrency, so a
// replayed or concurrent answer gets no second SVID.
func (a *Attestor) Activate(ctx context.Context, challengeID string, sealed, answer []byte) (*identity.Attested, error) {
	ns, name, err := ParseChallengeID(challengeID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	st, err := a.open(sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: challenge state is not authentic: %v", identity.ErrInvalidEvidence, err)
	}
	if st.ID != challengeID || st.Namespace != ns || st.Name != name {
		return nil, fmt.Errorf("%w: the challenge state is for another challenge", identity.ErrInvalidEvidence)
	}
	if !a.now().Before(st.ExpiresAt) {
		return nil, fmt.Errorf("%w: credential challenge expired", identity.ErrExpired)
	}
	if len(st.Secret) != secretSize || subtle.ConstantTimeCompare(st.Secret, answer) != 1 {
		return nil, fmt.Errorf("%w: wrong answer to the credential challenge", identity.ErrInvalidEvidence)
	}
	csr, err := identity.ParseCSRPEM(st.CSR)
	if err != nil {
		return nil, fmt.Errorf("%w: sealed CSR: %v", identity.ErrInvalidEvidence, err)
	}
	for range maxRedeemAttempts {
		bc := &bootstrapv1.BootstrapConfig{}
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
			}
			return nil, err
		}
		if err := checkBindings(st, bc); err != nil {
			return nil, err
		}
		if err := unanswered(bc); err != nil {
			return nil, err
		}
		id, err := a.liveMachineID(ctx, bc)
		if err != nil {
			return nil, err
		}
		if id.String() != st.SPIFFEID {
			return nil, fmt.Errorf("%w: BootstrapConfig %s/%s changed identity during the challenge", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
		}
		// The update carries the resourceVersion read above: of two answers racing, one wins.
		conditions.Set(bc, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
			Reason: CredentialActivatedReason, Message: "the VM's TPM answered the credential challenge; waiting for the VM to fetch its runner config",
			ObservedGeneration: bc.Generation})
		bc.Status.AttestedTPM = &bootstrapv1.AttestedTPM{EKSHA256: strings.ToLower(st.EKSHA256)}
		if err := a.Client.Status().Update(ctx, bc); err != nil {
			if apierrors.IsConflict(err) {
				continue // read again and decide again
			}
			return nil, err
		}
		chain, err := a.CA.SignCSR(csr, id, a.svidTTL())
		if err != nil {
			return nil, fmt.Errorf("signing SVID for %s: %w", id, err)
		}
		mns, mname, _ := identity.ParseMachineID(id.TrustDomain(), id)
		return &identity.Attested{ID: id, Machine: identity.Machine{Namespace: mns, Name: mname, BootstrapConfig: bc.Name}, Chain: chain}, nil
	}
	return nil, fmt.Errorf("activating the credential of %s/%s: too much contention", ns, name)
}

// checkBindings accepts sealed state only for this very BootstrapConfig (a config deleted and
// recreated under its name is another one), for the join token it redeemed, and for the TPM
// enrolled now, if any: an enrolment made during the challenge counts.
func checkBindings(st *challengeState, bc *bootstrapv1.BootstrapConfig) error {
	jt := bc.Status.JoinToken
	switch {
	case st.Namespace != bc.Namespace || st.Name != bc.Name || st.UID != string(bc.UID):
		return fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
	case jt == nil || jt.RedeemedTime == nil || st.TokenSHA256 != jt.SHA256:
		return fmt.Errorf("%w: the challenge is not for BootstrapConfig %s/%s's redeemed join token", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
	}
	if pin := bc.Annotations[EKSHA256Annotation]; pin != "" && !strings.EqualFold(pin, st.EKSHA256) {
		return fmt.Errorf("%w: the TPM's endorsement key is not the one enrolled for BootstrapConfig %s/%s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
	}
	return nil
}

// unanswered: the token was redeemed for this challenge and nothing has happened since; once a
// challenge is answered (or the VM went further) the status says so and the answer is spent.
func unanswered(bc *bootstrapv1.BootstrapConfig) error {
	if bc.Status.AttestedTime != nil || bc.Status.RunnerConfigTime != nil ||
		conditions.GetReason(bc, bootstrapv1.AttestedCondition) != bootstrapv1.TokenRedeemedReason {
		return fmt.Errorf("%w: credential challenge already answered", identity.ErrAlreadyRedeemed)
	}
	return nil
}

// sealKey is the AES-256 key of challenge state: HKDF-SHA256 from a secret only the CA key yields.
func (a *Attestor) sealKey() (cipher.AEAD, error) {
	ikm, err := a.CA.DeriveKey(sealKeyLabel)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, ikm, nil, sealInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal encrypts and authenticates st: version byte, random nonce, AES-256-GCM ciphertext.
func (a *Attestor) seal(st *challengeState) ([]byte, error) {
	aead, err := a.sealKey()
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+sealNonceLen, 1+sealNonceLen+len(plain)+aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return aead.Seal(out, out[1:], plain, []byte(sealInfo)), nil
}

// open returns the state sealed by seal with this CA's key, or an error for anything else.
func (a *Attestor) open(sealed []byte) (*challengeState, error) {
	if len(sealed) > MaxSealedState {
		return nil, errors.New("too large")
	}
	if len(sealed) < 1+sealNonceLen || sealed[0] != sealVersion {
		return nil, errors.New("malformed")
	}
	aead, err := a.sealKey()
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, sealed[1:1+sealNonceLen], sealed[1+sealNonceLen:], []byte(sealInfo))
	if err != nil {
		return nil, errors.New("not sealed by this service")
	}
	st := &challengeState{}
	if err := json.Unmarshal(plain, st); err != nil {
		return nil, fmt.Errorf("sealed state: %w", err)
	}
	return st, nil
}
