package provenance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// Envelope is a DSSE envelope (https://github.com/secure-systems-lab/dsse, protocol v1). Payload
// and each Sig are base64; the signature is over PAE(PayloadType, payload), never over the JSON.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one signature of an Envelope. KeyID is a hint to find the key: it is not signed,
// so Verify never trusts it.
type Signature struct {
	KeyID string `json:"keyid,omitempty"`
	Sig   string `json:"sig"`
}

// maxSignatures bounds the work one envelope can ask of Verify: every signature may be tried
// against every key.
const maxSignatures = 16

// PAE is DSSE's pre-authentication encoding: "DSSEv1 <len> <type> <len> <payload>", lengths in
// bytes as ASCII decimals. Signing it rather than the payload alone binds the payload type and
// leaves no ambiguity where the type ends and the payload begins.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// ParseEnvelope decodes a DSSE envelope from JSON, refusing one that lacks a payload type, a
// payload or signatures, or carries more signatures than Verify will try.
func ParseEnvelope(data []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: not a DSSE envelope: %v", ErrMalformed, err)
	}
	if env.PayloadType == "" || env.Payload == "" {
		return Envelope{}, fmt.Errorf("%w: the envelope has no payloadType or no payload", ErrMalformed)
	}
	if len(env.Signatures) == 0 {
		return Envelope{}, fmt.Errorf("%w: the envelope carries no signature", ErrBadSignature)
	}
	if len(env.Signatures) > maxSignatures {
		return Envelope{}, fmt.Errorf("%w: the envelope carries %d signatures, at most %d are tried", ErrMalformed, len(env.Signatures), maxSignatures)
	}
	return env, nil
}

// decodeBase64 accepts the standard and the URL-safe alphabets, padded or not, as DSSE allows
// either.
func decodeBase64(s string) ([]byte, error) {
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err == nil {
			return b, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}
