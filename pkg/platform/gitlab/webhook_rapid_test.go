package gitlab_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
)

// TestTokenAcceptsExactlyTheSecret delivers generated X-Gitlab-Token values against generated
// secrets: the secret itself, the secret changed by one byte (flipped, added, removed), cut
// short, extended, or anything else. GitLab signs nothing but sends the token, so a delivery
// is accepted exactly when the header is byte for byte the secret, never with no secret
// configured, and every refusal is ErrInvalidSignature.
func TestTokenAcceptsExactlyTheSecret(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		secret := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "secret")
		token := bytes.Clone(secret)
		switch rapid.IntRange(0, 5).Draw(rt, "change") {
		case 0: // the genuine token
		case 1:
			if len(token) > 0 {
				token[rapid.IntRange(0, len(token)-1).Draw(rt, "at")] ^= byte(rapid.IntRange(1, 255).Draw(rt, "xor"))
			}
		case 2:
			token = append(token, rapid.Byte().Draw(rt, "extra"))
		case 3:
			token = token[:rapid.IntRange(0, len(token)).Draw(rt, "cut")]
		case 4:
			token = append(token, token...)
		default:
			token = rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "other")
		}
		header := http.Header{}
		header.Set(gitlab.HeaderToken, string(token))
		err := gitlab.Verify(header, secret)
		want := len(secret) > 0 && bytes.Equal(token, secret)
		switch {
		case want && err != nil:
			rt.Fatalf("the secret itself was refused: %v", err)
		case !want && err == nil:
			rt.Fatalf("token %q accepted for secret %q", token, secret)
		case err != nil && !errors.Is(err, platform.ErrInvalidSignature):
			rt.Fatalf("refusal is not ErrInvalidSignature: %v", err)
		}
	})
}
