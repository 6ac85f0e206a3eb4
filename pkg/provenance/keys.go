package provenance

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// HyperFleet signs with Ed25519: signatures are deterministic, so a weak or broken random source
// on the manager's node cannot leak the key as a reused ECDSA nonce would; keys and signatures are
// small; there are no curve or hash parameters to get wrong; and the standard library implements
// it in constant time. ECDSA P-256 keys (signing over SHA-256, ASN.1 signatures) are accepted as
// well, for an installation whose key must live where only P-256 is offered.

// GenerateKey makes a new Ed25519 signing key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// KeyID is a public key's DSSE keyid: the hex sha256 of its PKIX DER encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	if err := supportedPublicKey(pub); err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// MarshalPrivateKeyPEM encodes a signing key as a PKCS#8 "PRIVATE KEY" PEM block.
func MarshalPrivateKeyPEM(key crypto.PrivateKey) ([]byte, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("provenance: %T is not a signing key", key)
	}
	if err := supportedPublicKey(signer.Public()); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKeyPEM decodes one PKCS#8 "PRIVATE KEY" PEM block holding an Ed25519 or ECDSA P-256
// key.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("provenance: no PEM block found")
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("provenance: PEM block is %q, want a PKCS#8 \"PRIVATE KEY\"", block.Type)
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, errors.New("provenance: more than one PEM block where one private key was expected")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("provenance: %T is not a signing key", key)
	}
	if err := supportedPublicKey(signer.Public()); err != nil {
		return nil, err
	}
	return signer, nil
}

// MarshalPublicKeyPEM encodes a public key as a PKIX "PUBLIC KEY" PEM block.
func MarshalPublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	if err := supportedPublicKey(pub); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKeysPEM decodes every PKIX "PUBLIC KEY" block in data, so one file may carry an
// installation's current and previous keys. Any other block, a private key above all, is refused.
func ParsePublicKeysPEM(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			if strings.HasSuffix(block.Type, "PRIVATE KEY") {
				return nil, errors.New("provenance: found a private key where a public key was expected: verifying needs only the public key, and the private key must not leave the installation")
			}
			return nil, fmt.Errorf("provenance: PEM block is %q, want \"PUBLIC KEY\"", block.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("provenance: %w", err)
		}
		if err := supportedPublicKey(pub); err != nil {
			return nil, err
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("provenance: no \"PUBLIC KEY\" PEM block found")
	}
	return keys, nil
}

func supportedPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("provenance: Ed25519 public key of %d bytes", len(k))
		}
		return nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("provenance: ECDSA key on %s, only P-256 is supported", k.Curve.Params().Name)
		}
		return nil
	default:
		return fmt.Errorf("provenance: unsupported key type %T: use Ed25519 or ECDSA P-256", pub)
	}
}
