package tpm

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// ChallengeSecretType marks the Secrets that hold a challenge between its two steps.
const ChallengeSecretType corev1.SecretType = "bootstrap.hyperfleet.io/tpm-challenge"

// challengeMACLabel names the key, derived from the CA key, that authenticates challenge Secrets.
const challengeMACLabel = "tpm-challenge v1"

// Keys of a challenge Secret. Every key but keyMAC is covered by the MAC, in this order.
const (
	keyChallengeID  = "challenge-id"
	keyConfig       = "bootstrap-config" // namespace/name
	keyConfigUID    = "bootstrap-config-uid"
	keyTokenSHA256  = "join-token-sha256" // the token this challenge redeemed
	keySecretSHA256 = "secret-sha256"
	keyCSR          = "csr"
	keySPIFFEID     = "spiffe-id"
	keyExpiresAt    = "expires-at"
	keyEKSHA256     = "ek-sha256"
	keyMAC          = "mac"
)

var macKeys = []string{keyChallengeID, keyConfig, keyConfigUID, keyTokenSHA256, keySecretSHA256, keyCSR,
	keySPIFFEID, keyExpiresAt, keyEKSHA256}

// ParseChallengeID returns the BootstrapConfig a challenge ID names: hftc_<namespace>_<name>_<32
// hex digits>. It proves nothing; the challenge state decides.
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

// ChallengeSecretName is the Secret, in the service's namespace, holding the pending challenge of
// the BootstrapConfig with this UID. The UID (not the name) means a BootstrapConfig deleted and
// recreated under the same name never inherits a challenge.
func ChallengeSecretName(bootstrapConfigUID string) string {
	return "tpm-challenge-" + bootstrapConfigUID
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
		keyConfig:       []byte(bc.Namespace + "/" + bc.Name),
		keyConfigUID:    []byte(bc.UID),
		keyTokenSHA256:  []byte(bc.Status.JoinToken.SHA256),
		keySecretSHA256: []byte(hex.EncodeToString(sum[:])),
		keyCSR:          csrPEM,
		keySPIFFEID:     []byte(id.String()),
		keyExpiresAt:    []byte(ch.ExpiresAt.Format(time.RFC3339)),
		keyEKSHA256:     []byte(v.ekSHA256),
	}
	if data[keyMAC], err = a.challengeMAC(data); err != nil {
		return nil, err
	}
	// No owner reference: owners cannot live in another namespace. An unanswered challenge is
	// replaced by the config's next one and refused once expired.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: ChallengeSecretName(string(bc.UID)),
		Labels: map[string]string{"app.kubernetes.io/part-of": "hyperfleet", "app.kubernetes.io/component": "tpm-challenge"}},
		Type: ChallengeSecretType, Data: data}
	err = a.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		if err = a.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err == nil {
			s.Data, s.Type = data, ChallengeSecretType
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
	ns, name, err := ParseChallengeID(challengeID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrInvalidEvidence, err)
	}
	if a.Namespace == "" {
		return nil, fmt.Errorf("TPM attestor needs its namespace")
	}
	unknown := fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
	bc := &bootstrapv1.BootstrapConfig{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unknown
		}
		return nil, err
	}
	s := &corev1.Secret{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ChallengeSecretName(string(bc.UID))}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unknown
		}
		return nil, err
	}
	if err := a.checkChallenge(s, bc, challengeID); err != nil {
		a.endChallenge(ctx, s)
		return nil, err
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
	mns, mname, _ := identity.ParseMachineID(id.TrustDomain(), id)
	return &identity.Attested{ID: id, Machine: identity.Machine{Namespace: mns, Name: mname, BootstrapConfig: bc.Name}, Chain: chain}, nil
}

// checkChallenge accepts s only if this service wrote it (its MAC), for this challenge, for this
// very BootstrapConfig and the token it redeemed, and for the TPM enrolled now, if any: an
// enrolment made during the challenge counts.
func (a *Attestor) checkChallenge(s *corev1.Secret, bc *bootstrapv1.BootstrapConfig, challengeID string) error {
	want, err := a.challengeMAC(s.Data)
	if err != nil {
		return err
	}
	unknown := fmt.Errorf("%w: unknown or finished challenge", identity.ErrInvalidEvidence)
	jt := bc.Status.JoinToken
	switch {
	case s.Type != ChallengeSecretType || !hmac.Equal(want, s.Data[keyMAC]):
		return fmt.Errorf("%w: challenge state is not authentic", identity.ErrInvalidEvidence)
	case subtle.ConstantTimeCompare(s.Data[keyChallengeID], []byte(challengeID)) != 1:
		return unknown
	case string(s.Data[keyConfig]) != bc.Namespace+"/"+bc.Name || string(s.Data[keyConfigUID]) != string(bc.UID):
		return unknown
	case jt == nil || jt.RedeemedTime == nil || string(s.Data[keyTokenSHA256]) != jt.SHA256:
		return fmt.Errorf("%w: the challenge is not for BootstrapConfig %s/%s's redeemed join token", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
	}
	if pin := bc.Annotations[EKSHA256Annotation]; pin != "" && !strings.EqualFold(pin, string(s.Data[keyEKSHA256])) {
		return fmt.Errorf("%w: the TPM's endorsement key is not the one enrolled for BootstrapConfig %s/%s", identity.ErrInvalidEvidence, bc.Namespace, bc.Name)
	}
	return nil
}

// challengeMAC authenticates a challenge's fields with a key only the service's CA key yields.
func (a *Attestor) challengeMAC(data map[string][]byte) ([]byte, error) {
	key, err := a.CA.DeriveKey(challengeMACLabel)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	for _, k := range macKeys {
		// Length-prefixed, so no two different field sets encode alike.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(data[k])))
		mac.Write(n[:])
		mac.Write(data[k])
	}
	return mac.Sum(nil), nil
}

// endChallenge deletes a failed challenge, best effort: it expires unanswerable anyway.
func (a *Attestor) endChallenge(ctx context.Context, s *corev1.Secret) {
	uid := s.UID
	_ = a.Client.Delete(context.WithoutCancel(ctx), s, client.Preconditions{UID: &uid})
}
