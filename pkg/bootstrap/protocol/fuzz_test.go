package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

// maxFuzzInput bounds one input, like the service's own request limit.
const maxFuzzInput = 64 << 10

// FuzzParseAgentConfig: any configuration the agent accepts renders back (as the controller
// renders it) into one it accepts again, unchanged.
func FuzzParseAgentConfig(f *testing.F) {
	f.Add([]byte("serviceURL: https://bootstrap:8443\ntrustDomain: hyperfleet.local\ncaBundle: x\njoinToken: hfjt_a_b_c\n" +
		"attestation: TPM\ntokenExpiresAt: \"2026-01-02T03:04:05.123456789+02:00\"\nrunner:\n  idleTimeout: 90s\n  labels: [linux]\n"))
	f.Add([]byte("serviceURL: s\ntrustDomain: t\ncaBundle: c\nattestation: SPIRE\nrunner: {idleTimeout: 1.5}\n"))
	f.Add([]byte("serviceURL: s\ntrustDomain: t\ncaBundle: c\nrunner: {downloadURL: u}\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		c, err := ParseAgentConfig(data)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("an accepted config does not render: %v", err)
		}
		again, err := ParseAgentConfig(out)
		if err != nil {
			t.Fatalf("a rendered config is refused: %v\n%s", err, out)
		}
		out2, err := again.Marshal()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("the config changed on a round trip:\n%s\n---\n%s", out, out2)
		}
	})
}

// FuzzTPMRequests decodes what unattested VMs send the service. Whatever decodes re-encodes to the
// same request: nothing is lost or invented between the wire and the attestor.
func FuzzTPMRequests(f *testing.F) {
	f.Add([]byte(`{"joinToken":"hfjt_a_b_c","csr":"-----BEGIN","ekPublic":"AAE=","akPublic":"","keyPublic":null,"certifyInfo":"/w==","certifySignature":"AA==","ekCertificate":"MA=="}`))
	f.Add([]byte(`{"challengeID":"hftc_ns_name_00112233445566778899aabbccddeeff","secret":"c2VjcmV0"}`))
	f.Add([]byte(`{"challengeID":"hftc_ns_name_00112233445566778899aabbccddeeff","secret":"c2VjcmV0","state":"AQID"}`))
	f.Add([]byte(`{"joinToken":"x","csr":"y"}`))
	f.Add([]byte(`{"ekPublic":"not base64"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		roundTrip[TPMAttestRequest](t, data)
		roundTrip[TPMActivateRequest](t, data)
		roundTrip[AttestRequest](t, data)
	})
}

func roundTrip[T any](t *testing.T, data []byte) {
	t.Helper()
	var v T
	if json.Unmarshal(data, &v) != nil {
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T does not encode: %v", v, err)
	}
	var again T
	if err := json.Unmarshal(enc, &again); err != nil {
		t.Fatalf("%T does not decode its own encoding: %v", v, err)
	}
	if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("%T changed on a round trip:\n%s\n%s", v, enc, enc2)
	}
}
