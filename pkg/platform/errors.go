package platform

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Errors a Platform returns are classified so controllers can decide without knowing the
// platform: match them with errors.Is.
var (
	// ErrNotFound: the runner, job, repository or installation does not exist (or is hidden).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request clashes with existing state, e.g. a runner name in use.
	ErrConflict = errors.New("conflict")
	// ErrUnauthorized: credentials are wrong, expired or lack permission. Retrying won't help
	// until configuration changes.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrRateLimited: the platform throttled us; RetryAt says when to come back.
	ErrRateLimited = errors.New("rate limited")
	// ErrBudgetReserved: the platform would still answer, but what is left of the rate-limit
	// budget is kept for runner registrations; RetryAt says when the budget is renewed. Only
	// work that can wait (the repair's listing) is refused so.
	ErrBudgetReserved = errors.New("rate-limit budget reserved for runner registrations")
	// ErrTransient: a timeout, network error or 5xx; retry with backoff.
	ErrTransient = errors.New("transient platform error")
	// ErrInvalid: the platform rejected the request as invalid (422/400).
	ErrInvalid = errors.New("invalid request")
	// ErrRunnerBusy: the runner is running a job and cannot be removed now.
	ErrRunnerBusy = errors.New("runner is busy")

	// ErrInvalidSignature: a webhook's signature is missing or wrong; answer 401.
	ErrInvalidSignature = errors.New("invalid webhook signature")
	// ErrMalformedWebhook: a webhook's body or headers cannot be parsed; answer 400.
	ErrMalformedWebhook = errors.New("malformed webhook")
)

// Errors of a pool's platform configuration and connection, matched with errors.Is whatever the
// platform: a Source wraps its own errors into these, so callers need not import it.
var (
	// ErrCredentials: the pool's credentials Secret is missing or unusable; nothing was sent.
	ErrCredentials = errors.New("CI platform credentials")
	// ErrInsecureURL: the pool's API URL is http:// and the pool does not allow it; nothing was
	// sent, since credentials would travel in clear text.
	ErrInsecureURL = errors.New("CI platform API URL is http:// and plain HTTP is not allowed")
	// ErrCABundle: the CA bundle the pool names is missing or holds no usable certificate;
	// nothing was sent.
	ErrCABundle = errors.New("CI platform API CA bundle")
	// ErrTLS: the TLS handshake or the server's certificate check failed: the server was not
	// the one the CA bundle (or the system roots) vouch for, and no request was sent.
	ErrTLS = errors.New("TLS verification of the CI platform API failed")
	// ErrUnsupported: the pool's spec.platform names a platform this process has no driver for
	// (none registered, or no member set); nothing was sent.
	ErrUnsupported = errors.New("CI platform not supported")
)

// IsPlainHTTP reports whether an API URL is http://.
func IsPlainHTTP(apiURL string) bool {
	return len(apiURL) >= 7 && strings.EqualFold(apiURL[:7], "http://")
}

// Error is a classified platform API error.
type Error struct {
	// Class is one of the Err* sentinels above.
	Class error
	// Op is the operation, e.g. "generate repository JIT config".
	Op string
	// StatusCode is the HTTP status, 0 if no response arrived.
	StatusCode int
	// RetryAt is when a rate limit lifts, if known.
	RetryAt time.Time
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: %v (HTTP %d): %v", e.Op, e.Class, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s: %v: %v", e.Op, e.Class, e.Err)
}

// Unwrap exposes both the class and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error { return []error{e.Class, e.Err} }

// IsRetryable reports whether an error is worth retrying later: rate limits and transient errors.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrTransient)
}

// RetryAt returns when a rate-limited call may be retried, if the platform said.
func RetryAt(err error) (time.Time, bool) {
	var pe *Error
	if errors.As(err, &pe) && !pe.RetryAt.IsZero() {
		return pe.RetryAt, true
	}
	return time.Time{}, false
}

// WebhookHTTPStatus maps a ParseWebhook error to the status a receiver should answer.
func WebhookHTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrInvalidSignature):
		return http.StatusUnauthorized
	case errors.Is(err, ErrMalformedWebhook):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
