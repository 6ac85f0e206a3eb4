package provenance_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// record stands for a job record as the job history builds it.
type record struct {
	VM        string `json:"vm"`
	Host      string `json:"host"`
	Template  string `json:"template"`
	Identity  string `json:"identity"`
	StartedAt string `json:"startedAt"`
	EndedAt   string `json:"endedAt"`
	Outcome   string `json:"outcome"`
}

func sampleRecord() record {
	return record{
		VM: "runner-7f3k2", Host: "pve-2", Template: "ubuntu-24.04<gpu>", Identity: "spiffe://fleet.example/vm/runner-7f3k2",
		StartedAt: "2026-03-01T10:00:00Z", EndedAt: "2026-03-01T10:04:12Z", Outcome: "succeeded",
	}
}

func newEd25519(t *testing.T) crypto.Signer {
	t.Helper()
	key, err := provenance.GenerateKey()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return key
}

func newP256(t *testing.T) crypto.Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return key
}

func signRecord(t *testing.T, key crypto.Signer, jobID string) provenance.Envelope {
	t.Helper()
	g := NewWithT(t)
	signer, err := provenance.NewSigner(key)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := provenance.NewStatement("github", jobID, sampleRecord())
	g.Expect(err).NotTo(HaveOccurred())
	env, err := signer.Sign(st)
	g.Expect(err).NotTo(HaveOccurred())
	return env
}

// forge signs a payload of the attacker's choosing over DSSE's PAE with the given key, bypassing
// every check Sign makes.
func forge(key crypto.Signer, payloadType string, payload []byte, keyID string) provenance.Envelope {
	pae := provenance.PAE(payloadType, payload)
	var sig []byte
	switch k := key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, pae)
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(pae)
		sig, _ = ecdsa.SignASN1(rand.Reader, k, sum[:])
	}
	return provenance.Envelope{
		PayloadType: payloadType,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures:  []provenance.Signature{{KeyID: keyID, Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
}

func payloadOf(t *testing.T, env provenance.Envelope) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(env.Payload)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return b
}

func keyID(t *testing.T, key crypto.Signer) string {
	t.Helper()
	id, err := provenance.KeyID(key.Public())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return id
}

func TestPAEMatchesTheDSSESpec(t *testing.T) {
	g := NewWithT(t)
	g.Expect(string(provenance.PAE("http://example.com/HelloWorld", []byte("hello world")))).
		To(Equal("DSSEv1 29 http://example.com/HelloWorld 11 hello world"))
	g.Expect(string(provenance.PAE("", nil))).To(Equal("DSSEv1 0  0 "))
}

func TestSignAndVerifyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(*testing.T) crypto.Signer
	}{
		{"ed25519", newEd25519},
		{"ecdsa-p256", newP256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			key := tc.key(t)
			env := signRecord(t, key, "42")
			g.Expect(env.PayloadType).To(Equal(provenance.PayloadType))
			g.Expect(env.Signatures).To(HaveLen(1))
			g.Expect(env.Signatures[0].KeyID).To(Equal(keyID(t, key)))

			// Through JSON, as a record export carries it.
			data, err := json.Marshal(env)
			g.Expect(err).NotTo(HaveOccurred())
			parsed, err := provenance.ParseEnvelope(data)
			g.Expect(err).NotTo(HaveOccurred())

			st, pub, err := provenance.VerifyKey(parsed, key.Public())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pub).To(Equal(key.Public()))
			g.Expect(st.Type).To(Equal(provenance.StatementType))
			g.Expect(st.PredicateType).To(Equal(provenance.PredicateType))
			g.Expect(st.Subject).To(HaveLen(1))
			g.Expect(st.Subject[0].Name).To(Equal("github/42"))
			var got record
			g.Expect(json.Unmarshal(st.Predicate, &got)).To(Succeed())
			g.Expect(got).To(Equal(sampleRecord()))
		})
	}
}

// TestSubjectDigestIsThePredicateBytesInThePayload: a third party can check the digest with any
// JSON tool by hashing the predicate as it stands in the signed payload.
func TestSubjectDigestIsThePredicateBytesInThePayload(t *testing.T) {
	g := NewWithT(t)
	env := signRecord(t, newEd25519(t), "42")
	payload := payloadOf(t, env)
	var raw struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate json.RawMessage `json:"predicate"`
	}
	g.Expect(json.Unmarshal(payload, &raw)).To(Succeed())
	g.Expect(bytes.Contains(payload, raw.Predicate)).To(BeTrue())
	g.Expect(string(raw.Predicate)).To(ContainSubstring("<gpu>"), "the predicate is not re-escaped")
	sum := sha256.Sum256(raw.Predicate)
	g.Expect(raw.Subject[0].Digest).To(Equal(map[string]string{"sha256": hex.EncodeToString(sum[:])}))
}

func TestNewStatementRefusesWhatIsNotAJobRecord(t *testing.T) {
	g := NewWithT(t)
	_, err := provenance.NewStatement("", "42", sampleRecord())
	g.Expect(err).To(HaveOccurred())
	_, err = provenance.NewStatement("github", "42", []string{"not", "an", "object"})
	g.Expect(err).To(MatchError(provenance.ErrMalformed))
	_, err = provenance.NewStatement("github", "42", nil)
	g.Expect(err).To(MatchError(provenance.ErrMalformed))
}
