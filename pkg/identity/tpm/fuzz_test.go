package tpm

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// maxEvidence bounds one fuzz input; real evidence is about 2 KiB.
const maxEvidence = 16 << 10

// FuzzVerifyEvidence decodes arbitrary TPM evidence. It must never panic, and whatever it accepts
// must keep its promises, checked here independently: the certification is over this join token,
// the certified key is the CSR's key, the EK can protect a credential and its recorded hash is
// the hash of its public key. The committed corpus holds genuine evidence from a swtpm.
func FuzzVerifyEvidence(f *testing.F) {
	f.Add([]byte{}, []byte{}, []byte{}, []byte{}, []byte{}, []byte{}, "")
	f.Fuzz(func(t *testing.T, csrPEM, ek, ak, key, info, sig []byte, token string) {
		if len(csrPEM)+len(ek)+len(ak)+len(key)+len(info)+len(sig)+len(token) > maxEvidence {
			return
		}
		csr, err := identity.ParseCSRPEM(csrPEM)
		if err != nil {
			return
		}
		ev := &protocol.TPMEvidence{CSR: csrPEM, EKPublic: ek, AKPublic: ak, KeyPublic: key, CertifyInfo: info, CertifySignature: sig}
		v, err := verifyEvidence(ev, token, csr)
		if err != nil {
			return
		}
		attest, err := tpm2.Unmarshal[tpm2.TPMSAttest](info)
		if err != nil || string(attest.ExtraData.Buffer) != string(protocol.CertifyQualifier(token)) {
			t.Fatalf("accepted a certification not qualified with the join token")
		}
		certified, err := tpm2.Unmarshal[tpm2.TPMTPublic](key)
		if err != nil {
			t.Fatalf("accepted an unparsable key: %v", err)
		}
		pub, err := tpm2.Pub(*certified)
		if err != nil {
			t.Fatalf("accepted a key without a public key: %v", err)
		}
		if eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(csr.PublicKey) {
			t.Fatalf("accepted a CSR for another key than the certified one")
		}
		der, err := x509.MarshalPKIXPublicKey(v.ekPub)
		if err != nil {
			t.Fatalf("accepted EK has no PKIX form: %v", err)
		}
		if sum := sha256.Sum256(der); hex.EncodeToString(sum[:]) != v.ekSHA256 {
			t.Fatalf("recorded EK hash %s is not the EK's", v.ekSHA256)
		}
		if _, _, _, err := makeCredential(v); err != nil {
			t.Fatalf("accepted an EK that cannot protect a credential: %v", err)
		}
	})
}

// FuzzParseChallengeID: whatever parses names a BootstrapConfig unambiguously and rebuilds the
// same ID; every well-formed ID parses back to its parts.
func FuzzParseChallengeID(f *testing.F) {
	f.Add("hftc_ns_name_00112233445566778899aabbccddeeff", "ns", "name")
	f.Add("hftc__name_00", "a_b", "c")
	f.Fuzz(func(t *testing.T, id, ns, name string) {
		if gotNS, gotName, err := ParseChallengeID(id); err == nil {
			if gotNS == "" || gotName == "" || strings.Contains(gotNS+gotName, "_") {
				t.Fatalf("%q parsed into %q/%q", id, gotNS, gotName)
			}
			if !strings.HasPrefix(id, fmt.Sprintf("%s_%s_%s_", challengeIDPrefix, gotNS, gotName)) {
				t.Fatalf("%q parsed into %q/%q, which is not what it says", id, gotNS, gotName)
			}
		}
		if ns == "" || name == "" || strings.Contains(ns+name, "_") {
			return
		}
		built := strings.Join([]string{challengeIDPrefix, ns, name, "00112233445566778899aabbccddeeff"}, "_")
		if gotNS, gotName, err := ParseChallengeID(built); err != nil || gotNS != ns || gotName != name {
			t.Fatalf("%q parsed into %q/%q, %v", built, gotNS, gotName, err)
		}
	})
}

// FuzzOpenChallengeState feeds arbitrary challenge state and answers to activation. It must never
// panic and must refuse everything but the state this service sealed, before asking the API
// server anything (the attestor here has no client: touching it would panic).
func FuzzOpenChallengeState(f *testing.F) {
	ca, _, _, err := identity.NewCA(spiffeid.RequireTrustDomainFromString("hyperfleet.test"), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	a := &Attestor{CA: ca}
	const id = "hftc_ns_name_00112233445566778899aabbccddeeff"
	genuine, err := a.seal(&challengeState{ID: id, Namespace: "ns", Name: "name", UID: "uid", Secret: make([]byte, secretSize),
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(id, []byte{}, []byte{})
	f.Add(id, []byte{sealVersion}, make([]byte, secretSize))
	f.Add(id, genuine[:len(genuine)-1], make([]byte, secretSize))
	f.Add(id, append([]byte{2}, genuine[1:]...), make([]byte, secretSize))
	f.Add(id, append(bytes.Clone(genuine), 0), make([]byte, secretSize))
	f.Fuzz(func(t *testing.T, challengeID string, state, answer []byte) {
		if bytes.Equal(state, genuine) {
			return
		}
		if st, err := a.open(state); err == nil {
			t.Fatalf("opened state this service never sealed: %+v", st)
		}
		if _, err := a.Activate(context.Background(), challengeID, state, answer); !errors.Is(err, identity.ErrInvalidEvidence) {
			t.Fatalf("activation with forged state was not refused as invalid evidence: %v", err)
		}
	})
}

// TestWriteEvidenceSeed refreshes FuzzVerifyEvidence's genuine seed from a swtpm when
// HYPERFLEET_WRITE_FUZZ_SEEDS is set; otherwise it does nothing.
func TestWriteEvidenceSeed(t *testing.T) {
	if os.Getenv("HYPERFLEET_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set HYPERFLEET_WRITE_FUZZ_SEEDS=1 to regenerate the fuzz seed")
	}
	const token = "hfjt_ns_name_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	ev, err := openDevice(t).Evidence(token)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range [][]byte{ev.CSR, ev.EKPublic, ev.AKPublic, ev.KeyPublic, ev.CertifyInfo, ev.CertifySignature} {
		fmt.Fprintf(&b, "[]byte(%q)\n", v)
	}
	fmt.Fprintf(&b, "string(%q)\n", token)
	dir := filepath.Join("testdata", "fuzz", "FuzzVerifyEvidence")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "genuine-swtpm"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
