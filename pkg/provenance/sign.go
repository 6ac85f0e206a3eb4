package provenance

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// Signer signs job records with one of the installation's private keys. Its zero value signs
// nothing.
type Signer struct {
	key   crypto.Signer
	keyID string
}

// NewSigner wraps an Ed25519 or ECDSA P-256 private key.
func NewSigner(key crypto.PrivateKey) (Signer, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return Signer{}, fmt.Errorf("provenance: %T is not a signing key", key)
	}
	id, err := KeyID(signer.Public())
	if err != nil {
		return Signer{}, err
	}
	return Signer{key: signer, keyID: id}, nil
}

// KeyID is the keyid of the Signer's public key.
func (s Signer) KeyID() string { return s.keyID }

// Public is the Signer's public key.
func (s Signer) Public() crypto.PublicKey {
	if s.key == nil {
		return nil
	}
	return s.key.Public()
}

// Sign encodes a statement and signs it in a DSSE envelope. It refuses a statement Verify would
// refuse, so nothing the installation signs is inconsistent: above all, the subject's digest must
// be the predicate's.
func (s Signer) Sign(st Statement) (Envelope, error) {
	if s.key == nil {
		return Envelope{}, errors.New("provenance: Sign on a Signer without a key")
	}
	payload, err := st.marshal()
	if err != nil {
		return Envelope{}, fmt.Errorf("provenance: encoding the statement: %w", err)
	}
	// Check what will be signed as Verify will read it, not the value in hand.
	signed, err := parseStatement(payload)
	if err != nil {
		return Envelope{}, err
	}
	if err := signed.check(); err != nil {
		return Envelope{}, fmt.Errorf("provenance: refusing to sign: %w", err)
	}
	sig, err := s.signPAE(PAE(PayloadType, payload))
	if err != nil {
		return Envelope{}, err
	}
	return Envelope{
		PayloadType: PayloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  []Signature{{KeyID: s.keyID, Sig: base64.StdEncoding.EncodeToString(sig)}},
	}, nil
}

func (s Signer) signPAE(pae []byte) ([]byte, error) {
	switch k := s.key.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(k, pae), nil
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(pae)
		return ecdsa.SignASN1(rand.Reader, k, sum[:])
	default:
		// A KMS- or HSM-backed crypto.Signer: Ed25519 signs the message itself, ECDSA its digest.
		if _, ok := k.Public().(ed25519.PublicKey); ok {
			return k.Sign(rand.Reader, pae, crypto.Hash(0))
		}
		sum := sha256.Sum256(pae)
		return k.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
}
