package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	gh "github.com/google/go-github/v66/github"
	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/rapidgen"
)

// TestSignatureAcceptsExactlyTheSignedBody signs generated bodies with generated secrets and
// delivers them unchanged, or with the body, the X-Hub-Signature-256 header or the secret
// changed. The genuine delivery is accepted. Whatever the change, a delivery is accepted only
// when its body is the signed body and its header carries that body's HMAC under the secret,
// and go-github's own ValidateSignature agrees with every acceptance; a SHA-1 signature, which
// go-github would take, is always refused.
func TestSignatureAcceptsExactlyTheSignedBody(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		secret := rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(rt, "secret")
		body := rapid.SliceOfN(rapid.Byte(), 0, 512).Draw(rt, "body")
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		sum := mac.Sum(nil)
		header := "sha256=" + hex.EncodeToString(sum)
		if err := VerifySignature(secret, body, header); err != nil {
			rt.Fatalf("genuine delivery refused: %v", err)
		}

		gotBody, gotHeader, gotSecret := body, header, secret
		switch rapid.IntRange(0, 3).Draw(rt, "change") {
		case 0:
			gotBody = rapidgen.Mutate(rt, "body", body, 80)
		case 1:
			gotHeader = string(rapidgen.Mutate(rt, "header", []byte(header), 80))
		case 2:
			gotSecret = rapidgen.Mutate(rt, "secret", secret, 80)
		case 3: // the legacy header GitHub also sends, over the same body
			gotHeader = sha1Signature(secret, body)
		}
		err := VerifySignature(gotSecret, gotBody, gotHeader)
		if err != nil {
			if !errors.Is(err, platform.ErrInvalidSignature) {
				rt.Fatalf("refusal is not ErrInvalidSignature: %v", err)
			}
			return
		}
		hexSig, _ := bytes.CutPrefix([]byte(gotHeader), []byte("sha256="))
		got, decodeErr := hex.DecodeString(string(hexSig))
		switch {
		case !bytes.Equal(gotBody, body):
			rt.Fatalf("a changed body was accepted: %q for %q", gotBody, body)
		case !bytes.HasPrefix([]byte(gotHeader), []byte("sha256=")) || decodeErr != nil || !hmac.Equal(got, sum):
			rt.Fatalf("header %q accepted, which does not carry the body's HMAC", gotHeader)
		case !bytes.Equal(bytes.TrimRight(gotSecret, "\x00"), bytes.TrimRight(secret, "\x00")):
			// HMAC pads a short key with zeros: "k" and "k\x00" are one key.
			rt.Fatalf("a signature made with another secret was accepted (%q, signed with %q)", gotSecret, secret)
		}
		if err := gh.ValidateSignature(gotHeader, gotBody, gotSecret); err != nil {
			rt.Fatalf("accepted a delivery go-github refuses: %v", err)
		}
	})
}
