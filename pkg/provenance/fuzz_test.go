package provenance_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// FuzzVerifyEnvelope feeds arbitrary bytes to ParseEnvelope and Verify: neither may panic, and
// nothing verifies but a payload the key really signed. Normal runs try the seeds only; explore
// with go test -fuzz=FuzzVerifyEnvelope -fuzztime=1m ./pkg/provenance/.
func FuzzVerifyEnvelope(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	signer, err := provenance.NewSigner(key)
	if err != nil {
		f.Fatal(err)
	}
	st, err := provenance.NewStatement("gitlab", "9001", map[string]any{"vm": "runner-a", "outcome": "failed", "exit": 1})
	if err != nil {
		f.Fatal(err)
	}
	env, err := signer.Sign(st)
	if err != nil {
		f.Fatal(err)
	}
	signed, _ := base64.StdEncoding.DecodeString(env.Payload)
	good, _ := json.Marshal(env)
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"payloadType":"application/vnd.in-toto+json"`), []byte(`"payloadType":"text/plain"`), 1))
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":""}]}`))
	f.Add([]byte(`{"payloadType":"","payload":"","signatures":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"signatures":[` + string(bytes.Repeat([]byte(`{"sig":"AA=="},`), 20)) + `{}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := provenance.ParseEnvelope(data)
		if err != nil {
			return
		}
		if _, err := provenance.Verify(env, key.Public()); err != nil {
			return
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			payload, _ = base64.URLEncoding.DecodeString(env.Payload)
		}
		if !bytes.Equal(payload, signed) {
			t.Fatalf("verified a payload the key never signed: %q", payload)
		}
	})
}
