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
)

// mutate changes s in one generated way: a byte flipped, inserted or removed, a cut, or a
// replacement. The result may equal s (a flip to the same byte is not drawn, but a cut of
// nothing is); callers compare.
func mutate(rt *rapid.T, label string, s []byte) []byte {
	out := bytes.Clone(s)
	switch op := rapid.IntRange(0, 4).Draw(rt, label+"Op"); {
	case op == 0 && len(out) > 0:
		i := rapid.IntRange(0, len(out)-1).Draw(rt, label+"At")
		out[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, label+"Xor"))
	case op == 1:
		i := rapid.IntRange(0, len(out)).Draw(rt, label+"At")
		out = append(out[:i], append([]byte{rapid.Byte().Draw(rt, label+"Byte")}, out[i:]...)...)
	case op == 2 && len(out) > 0:
		i := rapid.IntRange(0, len(out)-1).Draw(rt, label+"At")
		out = append(out[:i], out[i+1:]...)
	case op == 3:
		out = out[:rapid.IntRange(0, len(out)).Draw(rt, label+"Cut")]
	default:
		out = rapid.SliceOfN(rapid.Byte(), 0, 80).Draw(rt, label+"New")
	}
	return out
}

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
			gotBody = mutate(rt, "body", body)
		case 1:
			gotHeader = string(mutate(rt, "header", []byte(header)))
		case 2:
			gotSecret = mutate(rt, "secret", secret)
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
