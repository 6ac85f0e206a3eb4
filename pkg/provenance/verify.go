package provenance

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The checks Verify makes, in order; its errors wrap one of these and say what failed.
var (
	// ErrWrongPayloadType: the envelope does not carry an in-toto Statement.
	ErrWrongPayloadType = errors.New("wrong payload type")
	// ErrMalformed: the envelope or its statement cannot be decoded.
	ErrMalformed = errors.New("malformed envelope")
	// ErrBadSignature: a signature names one of the given keys but does not verify under it, so the
	// payload or the signature was altered; also an envelope without signatures.
	ErrBadSignature = errors.New("bad signature")
	// ErrUnknownKey: no signature verifies under any given key, and none names one of them: the
	// envelope was signed by another key, or the right public key was not given.
	ErrUnknownKey = errors.New("unknown signing key")
	// ErrUnsupportedStatement: the signed statement is not a HyperFleet job record.
	ErrUnsupportedStatement = errors.New("unsupported statement")
	// ErrDigestMismatch: the subject's digest is not the predicate's.
	ErrDigestMismatch = errors.New("subject digest does not match the predicate")
)

// Verify checks an envelope against the installation's public keys (the current one and any
// previous ones) and returns the statement it carries: the payload type, that some signature
// verifies under one of the keys, then that the statement is a job record whose subject digest is
// its predicate's. Nothing of the payload is trusted before its signature verifies.
func Verify(env Envelope, pubKeys ...crypto.PublicKey) (Statement, error) {
	st, _, err := VerifyKey(env, pubKeys...)
	return st, err
}

// VerifyKey is Verify that also returns the public key whose signature verified.
func VerifyKey(env Envelope, pubKeys ...crypto.PublicKey) (Statement, crypto.PublicKey, error) {
	if len(pubKeys) == 0 {
		return Statement{}, nil, fmt.Errorf("%w: no public keys to verify with", ErrUnknownKey)
	}
	ids := make([]string, len(pubKeys))
	for i, pub := range pubKeys {
		id, err := KeyID(pub)
		if err != nil {
			return Statement{}, nil, err
		}
		ids[i] = id
	}
	if env.PayloadType != PayloadType {
		return Statement{}, nil, fmt.Errorf("%w: %q, want %q", ErrWrongPayloadType, env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return Statement{}, nil, fmt.Errorf("%w: the envelope carries no signature", ErrBadSignature)
	}
	if len(env.Signatures) > maxSignatures {
		return Statement{}, nil, fmt.Errorf("%w: the envelope carries %d signatures, at most %d are tried", ErrMalformed, len(env.Signatures), maxSignatures)
	}
	payload, err := decodeBase64(env.Payload)
	if err != nil {
		return Statement{}, nil, fmt.Errorf("%w: payload is not base64: %v", ErrMalformed, err)
	}
	pae := PAE(env.PayloadType, payload)

	claimed := ""
	for _, s := range env.Signatures {
		for _, id := range ids {
			if claimed == "" && s.KeyID == id {
				claimed = id
			}
		}
	}
	signer := -1
	// A signature is tried first under the key its keyid names, then under every key: the keyid
	// is not signed, so it only saves work and never decides.
	for pass := 0; pass < 2 && signer < 0; pass++ {
		for _, s := range env.Signatures {
			sig, err := decodeBase64(s.Sig)
			if err != nil {
				continue
			}
			for i, pub := range pubKeys {
				if named := s.KeyID == ids[i]; (pass == 0) != named {
					continue
				}
				if verifySignature(pub, pae, sig) {
					signer = i
					break
				}
			}
			if signer >= 0 {
				break
			}
		}
	}
	if signer < 0 {
		if claimed != "" {
			return Statement{}, nil, fmt.Errorf("%w: the signature naming key %s does not verify: the payload or the signature was altered", ErrBadSignature, claimed)
		}
		return Statement{}, nil, fmt.Errorf("%w: no signature verifies under the given keys (%s); the envelope names %s", ErrUnknownKey, strings.Join(ids, ", "), namedKeys(env.Signatures))
	}

	st, err := parseStatement(payload)
	if err != nil {
		return Statement{}, nil, err
	}
	if err := st.check(); err != nil {
		return Statement{}, nil, err
	}
	return st, pubKeys[signer], nil
}

func verifySignature(pub crypto.PublicKey, pae, sig []byte) bool {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, pae, sig)
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(pae)
		return ecdsa.VerifyASN1(k, sum[:], sig)
	}
	return false
}

func parseStatement(payload []byte) (Statement, error) {
	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return Statement{}, fmt.Errorf("%w: the payload is not an in-toto Statement: %v", ErrMalformed, err)
	}
	return st, nil
}

func namedKeys(sigs []Signature) string {
	var ids []string
	for _, s := range sigs {
		if s.KeyID != "" {
			ids = append(ids, s.KeyID)
		}
	}
	if len(ids) == 0 {
		return "no keyid"
	}
	return "keyid " + strings.Join(ids, ", ")
}
