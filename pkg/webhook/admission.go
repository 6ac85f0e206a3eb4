package webhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// lane is how much a request has proven before its body is read, which decides how it competes
// for the receiver's slots.
type lane int

const (
	// laneClaimed requests carry a well-formed credential that only the body can verify
	// (GitHub's HMAC, Buildkite's signature). Anyone can forge such a header, so these requests
	// share the slots fairly by source address.
	laneClaimed lane = iota
	// laneProven requests carry a token already compared with the secret (GitLab, Buildkite's
	// token): only the platform can send them, and they may take a slot from a claimed request.
	laneProven
)

// credentialCheck decides from a delivery's headers alone whether it can be genuine: it returns
// the request's lane, or platform.ErrInvalidSignature for a request to refuse before its body is
// read. The parser still verifies every delivery in full afterwards.
type credentialCheck func(header http.Header, secret []byte) (lane, error)

// Platforms' webhook headers, as their drivers read them (pkg/webhook links no driver).
const (
	headerGitHubSignature    = "X-Hub-Signature-256"
	headerGitLabToken        = "X-Gitlab-Token"
	headerBuildkiteToken     = "X-Buildkite-Token"
	headerBuildkiteSignature = "X-Buildkite-Signature"
)

// credentialChecks knows how each platform proves a delivery. A platform without an entry gets
// no early check: its requests are all claimed, and its parser alone decides.
var credentialChecks = map[platform.Kind]credentialCheck{
	platform.KindGitHub:    checkGitHub,
	platform.KindGitLab:    checkGitLab,
	platform.KindBuildkite: checkBuildkite,
}

// admit checks what a request's headers can prove for the route of kind. A route without a
// secret refuses everything, as its parser would.
func admit(kind platform.Kind, header http.Header, secret []byte) (lane, error) {
	if len(secret) == 0 {
		return laneClaimed, fmt.Errorf("%w: no webhook secret is configured for %s", platform.ErrInvalidSignature, kind)
	}
	check, ok := credentialChecks[kind]
	if !ok {
		return laneClaimed, nil
	}
	return check(header, secret)
}

// checkGitHub: the HMAC covers the body, so only its shape can be checked before the body
// arrives; a request without it (or with only the SHA-1 header) is refused at once.
func checkGitHub(header http.Header, _ []byte) (lane, error) {
	hexSig, ok := strings.CutPrefix(header.Get(headerGitHubSignature), "sha256=")
	if !ok {
		return laneClaimed, fmt.Errorf("%w: no %s", platform.ErrInvalidSignature, headerGitHubSignature)
	}
	if sig, err := hex.DecodeString(hexSig); err != nil || len(sig) != sha256.Size {
		return laneClaimed, fmt.Errorf("%w: %s is not sha256=<64 hex digits>", platform.ErrInvalidSignature, headerGitHubSignature)
	}
	return laneClaimed, nil
}

// checkGitLab: GitLab sends the secret itself, so the delivery is verified in full here.
func checkGitLab(header http.Header, secret []byte) (lane, error) {
	if !tokenMatches(header.Get(headerGitLabToken), secret) {
		return laneClaimed, fmt.Errorf("%w: %s is missing or wrong", platform.ErrInvalidSignature, headerGitLabToken)
	}
	return laneProven, nil
}

// checkBuildkite: a signature covers the body, as GitHub's does, and is preferred when both are
// sent (as the parser does); a token alone is verified here.
func checkBuildkite(header http.Header, secret []byte) (lane, error) {
	if header.Get(headerBuildkiteSignature) != "" {
		return laneClaimed, nil
	}
	if !tokenMatches(header.Get(headerBuildkiteToken), secret) {
		return laneClaimed, fmt.Errorf("%w: neither %s nor a matching %s", platform.ErrInvalidSignature, headerBuildkiteSignature, headerBuildkiteToken)
	}
	return laneProven, nil
}

// tokenMatches compares in constant time; hashing first makes it constant in the length too.
func tokenMatches(got string, secret []byte) bool {
	if got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(secret)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
