package provenance_test

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// These tests play someone who holds signed records and every key but the installation's, and
// wants a record the installation never signed to verify.

func TestTamperedPredicateFails(t *testing.T) {
	g := NewWithT(t)
	key := newEd25519(t)
	env := signRecord(t, key, "42")
	payload := payloadOf(t, env)
	i := bytes.Index(payload, []byte(`"succeeded"`))
	g.Expect(i).To(BeNumerically(">", 0))

	// One byte of the predicate: "succeeded" becomes "sucdeeded".
	tampered := bytes.Clone(payload)
	tampered[i+4] = 'd'
	env.Payload = base64.StdEncoding.EncodeToString(tampered)
	_, err := provenance.Verify(env, key.Public())
	g.Expect(err).To(MatchError(provenance.ErrBadSignature))
	g.Expect(err.Error()).To(ContainSubstring(keyID(t, key)))

	// Fixing the subject's digest to match does not help either: the signature covers it all.
	var st provenance.Statement
	g.Expect(json.Unmarshal(tampered, &st)).To(Succeed())
	sum := sha256.Sum256(st.Predicate)
	st.Subject[0].Digest["sha256"] = hex.EncodeToString(sum[:])
	reencoded, err := json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	env.Payload = base64.StdEncoding.EncodeToString(reencoded)
	_, err = provenance.Verify(env, key.Public())
	g.Expect(err).To(MatchError(provenance.ErrBadSignature))
}

// TestReusedSignatureFails: a valid signature from one record put on another record's payload
// (or a payload of the attacker's making) verifies nothing.
func TestReusedSignatureFails(t *testing.T) {
	g := NewWithT(t)
	key := newEd25519(t)
	first, second := signRecord(t, key, "41"), signRecord(t, key, "42")
	second.Signatures = first.Signatures
	_, err := provenance.Verify(second, key.Public())
	g.Expect(err).To(MatchError(provenance.ErrBadSignature))
}

func TestSignatureFromAnotherKeyFails(t *testing.T) {
	g := NewWithT(t)
	installation, attacker := newEd25519(t), newEd25519(t)
	env := signRecord(t, attacker, "42")
	_, err := provenance.Verify(env, installation.Public())
	g.Expect(err).To(MatchError(provenance.ErrUnknownKey))
	g.Expect(err.Error()).To(ContainSubstring(keyID(t, attacker)))

	// Naming the installation's key in keyid does not help: keyid is a hint, the signature decides.
	env.Signatures[0].KeyID = keyID(t, installation)
	_, err = provenance.Verify(env, installation.Public())
	g.Expect(err).To(MatchError(provenance.ErrBadSignature))

	// Nor does adding a second forged signature, or one with broken base64, beside it.
	env.Signatures = append(env.Signatures, provenance.Signature{KeyID: keyID(t, installation), Sig: "!!not base64"})
	_, err = provenance.Verify(env, installation.Public())
	g.Expect(err).To(MatchError(provenance.ErrBadSignature))
}

// TestKeyIDIsOnlyAHint: an honest signature whose keyid was lost or changed still verifies, and
// the key reported is the one that verified, not the one named.
func TestKeyIDIsOnlyAHint(t *testing.T) {
	g := NewWithT(t)
	installation, other := newEd25519(t), newEd25519(t)
	env := signRecord(t, installation, "42")
	for _, id := range []string{"", keyID(t, other), "nonsense"} {
		env.Signatures[0].KeyID = id
		_, pub, err := provenance.VerifyKey(env, other.Public(), installation.Public())
		g.Expect(err).NotTo(HaveOccurred(), "keyid %q", id)
		g.Expect(pub).To(Equal(installation.Public()))
	}
}

// TestValidSignatureOverInconsistentStatementFails: even the installation's own signature over a
// statement whose subject digest is not its predicate's does not make a valid record, so no
// signature can be reused to vouch for a predicate it was not made over.
func TestValidSignatureOverInconsistentStatementFails(t *testing.T) {
	g := NewWithT(t)
	key := newEd25519(t)
	signer, err := provenance.NewSigner(key)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := provenance.NewStatement("github", "42", sampleRecord())
	g.Expect(err).NotTo(HaveOccurred())
	other, err := provenance.NewStatement("github", "43", map[string]string{"outcome": "failed"})
	g.Expect(err).NotTo(HaveOccurred())
	st.Subject[0].Digest = other.Subject[0].Digest

	_, err = signer.Sign(st)
	g.Expect(err).To(MatchError(provenance.ErrDigestMismatch), "Sign refuses it")

	payload, err := json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = provenance.Verify(forge(key, provenance.PayloadType, payload, keyID(t, key)), key.Public())
	g.Expect(err).To(MatchError(provenance.ErrDigestMismatch))

	delete(st.Subject[0].Digest, "sha256")
	st.Subject[0].Digest["sha512"] = "00"
	payload, err = json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = provenance.Verify(forge(key, provenance.PayloadType, payload, keyID(t, key)), key.Public())
	g.Expect(err).To(MatchError(provenance.ErrDigestMismatch))
}

// TestSignedStatementsThatAreNotJobRecordsFail: a signature over something else the key might
// ever sign is not a job record.
func TestSignedStatementsThatAreNotJobRecordsFail(t *testing.T) {
	key := newEd25519(t)
	good, err := provenance.NewStatement("github", "42", sampleRecord())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		name   string
		mutate func(*provenance.Statement)
	}{
		{"other _type", func(s *provenance.Statement) { s.Type = "https://in-toto.io/Statement/v0.1" }},
		{"other predicateType", func(s *provenance.Statement) { s.PredicateType = "https://slsa.dev/provenance/v1" }},
		{"two subjects", func(s *provenance.Statement) { s.Subject = append(s.Subject, s.Subject[0]) }},
		{"no subject", func(s *provenance.Statement) { s.Subject = nil }},
		{"nameless subject", func(s *provenance.Statement) { s.Subject[0].Name = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			st := good
			st.Subject = []provenance.Subject{{Name: good.Subject[0].Name, Digest: good.Subject[0].Digest}}
			tc.mutate(&st)
			payload, err := json.Marshal(st)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = provenance.Verify(forge(key, provenance.PayloadType, payload, ""), key.Public())
			g.Expect(err).To(MatchError(provenance.ErrUnsupportedStatement))
		})
	}
}

func TestWrongPayloadTypeFails(t *testing.T) {
	g := NewWithT(t)
	key := newEd25519(t)
	env := signRecord(t, key, "42")
	env.PayloadType = "application/json"
	_, err := provenance.Verify(env, key.Public())
	g.Expect(err).To(MatchError(provenance.ErrWrongPayloadType))

	// Signed as another type by the right key, it is still refused: PAE binds the type, and only
	// in-toto statements are job records.
	forged := forge(key, "application/json", payloadOf(t, signRecord(t, key, "42")), keyID(t, key))
	_, err = provenance.Verify(forged, key.Public())
	g.Expect(err).To(MatchError(provenance.ErrWrongPayloadType))
}

func TestMalformedEnvelopesFail(t *testing.T) {
	key := newEd25519(t)
	good := signRecord(t, key, "42")
	for _, tc := range []struct {
		name   string
		mutate func(*provenance.Envelope)
		want   error
	}{
		{"no signatures", func(e *provenance.Envelope) { e.Signatures = nil }, provenance.ErrBadSignature},
		{"payload not base64", func(e *provenance.Envelope) { e.Payload = "%%%" }, provenance.ErrMalformed},
		{"too many signatures", func(e *provenance.Envelope) {
			for range 20 {
				e.Signatures = append(e.Signatures, e.Signatures[0])
			}
		}, provenance.ErrMalformed},
		{"signed non-JSON", func(e *provenance.Envelope) {
			*e = forge(key, provenance.PayloadType, []byte("not json"), "")
		}, provenance.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := good
			env.Signatures = append([]provenance.Signature(nil), good.Signatures...)
			tc.mutate(&env)
			_, err := provenance.Verify(env, key.Public())
			NewWithT(t).Expect(err).To(MatchError(tc.want))
		})
	}
	_, err := provenance.Verify(good)
	NewWithT(t).Expect(err).To(MatchError(provenance.ErrUnknownKey), "no keys given")
}

// TestRotatedKeys: records signed before a rotation verify with the previous key in the list,
// records signed after with the current one, and dropping the previous key is what makes the old
// records unverifiable.
func TestRotatedKeys(t *testing.T) {
	g := NewWithT(t)
	previous, current := newEd25519(t), newP256(t)
	before, after := signRecord(t, previous, "41"), signRecord(t, current, "42")
	keys := []crypto.PublicKey{current.Public(), previous.Public()}

	st, pub, err := provenance.VerifyKey(before, keys...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Subject[0].Name).To(Equal("github/41"))
	g.Expect(pub).To(Equal(previous.Public()))
	st, pub, err = provenance.VerifyKey(after, keys...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Subject[0].Name).To(Equal("github/42"))
	g.Expect(pub).To(Equal(current.Public()))

	_, err = provenance.Verify(before, current.Public())
	g.Expect(err).To(MatchError(provenance.ErrUnknownKey))
}
