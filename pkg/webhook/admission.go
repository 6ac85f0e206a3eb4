package webhook

import (
	"fmt"
	"net/http"

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

// admit checks what a request's headers can prove for the route of kind, through the platform's
// Driver.CheckDelivery. A route without a secret refuses everything, as its parser would; a
// platform without a check gets none: its requests are all claimed, and its parser alone decides.
func admit(kind platform.Kind, header http.Header, secret []byte) (lane, error) {
	if len(secret) == 0 {
		return laneClaimed, fmt.Errorf("%w: no webhook secret is configured for %s", platform.ErrInvalidSignature, kind)
	}
	d, ok := platform.Lookup(kind)
	if !ok || d.CheckDelivery == nil {
		return laneClaimed, nil
	}
	proven, err := d.CheckDelivery(header, secret)
	if err != nil {
		return laneClaimed, err
	}
	if proven {
		return laneProven, nil
	}
	return laneClaimed, nil
}
