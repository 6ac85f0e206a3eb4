package github

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v66/github"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// classify wraps a go-github error in a platform.Error whose class controllers act on.
func classify(op string, resp *gh.Response, err error) error {
	if err == nil {
		return nil
	}
	pe := &platform.Error{Op: op, Err: err, Class: platform.ErrTransient}
	if resp != nil && resp.Response != nil {
		pe.StatusCode = resp.StatusCode
	}
	var rateErr *gh.RateLimitError
	var abuseErr *gh.AbuseRateLimitError
	var tokenErr *ghinstallation.HTTPError
	var apiErr *gh.ErrorResponse
	switch {
	case errors.As(err, &rateErr):
		pe.Class, pe.StatusCode, pe.RetryAt = platform.ErrRateLimited, http.StatusForbidden, rateErr.Rate.Reset.Time
	case errors.As(err, &abuseErr):
		pe.Class, pe.StatusCode = platform.ErrRateLimited, http.StatusForbidden
		if abuseErr.RetryAfter != nil {
			pe.RetryAt = time.Now().Add(*abuseErr.RetryAfter)
		}
	case errors.As(err, &tokenErr):
		// The installation token could not be minted: a wrong key, App ID or installation is a
		// credentials problem whatever the exact status; a server error or timeout is not.
		if tokenErr.Response == nil {
			break
		}
		_ = tokenErr.Response.Body.Close()
		pe.StatusCode = tokenErr.Response.StatusCode
		if pe.StatusCode < 500 {
			pe.Class = platform.ErrUnauthorized
		}
	case errors.As(err, &apiErr):
		pe.Class = classifyStatus(apiErr.Response.StatusCode)
		pe.StatusCode = apiErr.Response.StatusCode
		if pe.StatusCode == http.StatusTooManyRequests {
			pe.RetryAt = retryAfter(apiErr.Response)
		}
	case errors.Is(err, context.Canceled):
		return err
	}
	pe.Err = platform.MarkTLS(err)
	return pe
}

// classedError is a GitHub error with its own message that matches a platform-neutral class.
type classedError struct {
	msg   string
	class error
}

func (e *classedError) Error() string        { return e.msg }
func (e *classedError) Is(target error) bool { return target == e.class }

func classifyStatus(status int) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return platform.ErrUnauthorized
	case status == http.StatusNotFound:
		return platform.ErrNotFound
	case status == http.StatusConflict:
		return platform.ErrConflict
	case status == http.StatusTooManyRequests:
		return platform.ErrRateLimited
	case status >= 500:
		return platform.ErrTransient
	default:
		return platform.ErrInvalid
	}
}

func retryAfter(resp *http.Response) time.Time {
	if resp == nil {
		return time.Time{}
	}
	if d, err := time.ParseDuration(resp.Header.Get("Retry-After") + "s"); err == nil {
		return time.Now().Add(d)
	}
	return time.Time{}
}
