package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Defaults for GitLab.com.
const (
	DefaultURL         = "https://gitlab.com"
	DefaultHTTPTimeout = 30 * time.Second
)

// Config is how HyperFleet reaches one GitLab instance as one access token.
type Config struct {
	// URL is the instance root, e.g. https://gitlab.example.com (DefaultURL when empty); the
	// REST API is URL/api/v4 and VMs' runners are given URL.
	URL string
	// Token is a personal, group or project access token, least privilege: create_runner,
	// manage_runner and read_api (instance runners need an administrator's token).
	Token string
	// AllowInsecureHTTP permits an http:// URL; otherwise it is refused before any request,
	// since the token would travel in clear text.
	AllowInsecureHTTP bool
	// HTTPTimeout bounds each request; DefaultHTTPTimeout when zero.
	HTTPTimeout time.Duration
	// Transport is the base round tripper (a CA bundle, a proxy); a clone of the default when nil.
	Transport http.RoundTripper
	// CAPEM is the CA bundle that signs the instance's certificate, if private; it travels in
	// the VM's runner config so gitlab-runner trusts the same instance.
	CAPEM []byte
}

// Client talks to one GitLab instance as one access token. It is safe for concurrent use.
type Client struct {
	cfg Config
	gl  *gl.Client
	// remaining is RateLimit-Remaining of the last response, -1 before any.
	remaining atomic.Int64
	// ids caches group and project IDs by full path ("group:a/b", "project:a/b/c").
	ids sync.Map
}

// NewClient validates the configuration; it makes no request.
func NewClient(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	cfg.URL = strings.TrimSuffix(strings.TrimSuffix(cfg.URL, "/"), "/api/v4")
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return nil, fmt.Errorf("%w: GitLab URL %q is not an http(s) URL", platform.ErrCredentials, cfg.URL)
	case strings.TrimSpace(cfg.Token) == "":
		return nil, fmt.Errorf("%w: no GitLab access token", platform.ErrCredentials)
	case platform.IsPlainHTTP(cfg.URL) && !cfg.AllowInsecureHTTP:
		return nil, fmt.Errorf("%w: %s", platform.ErrInsecureURL, cfg.URL)
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = DefaultHTTPTimeout
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c := &Client{cfg: cfg}
	c.remaining.Store(-1)
	hc := &http.Client{Transport: rateObserver{next: cfg.Transport, remaining: &c.remaining}, Timeout: cfg.HTTPTimeout}
	// No retries and no client-side limiter: client-go would otherwise retry 429s and 5xx
	// itself (holding a reconcile for minutes) and pace every call from the first response's
	// RateLimit-Limit. HyperFleet instead surfaces platform.ErrRateLimited with RetryAt and
	// comes back when GitLab says the budget is refilled.
	c.gl, err = gl.NewClient(strings.TrimSpace(cfg.Token), gl.WithBaseURL(cfg.URL+"/api/v4"), gl.WithHTTPClient(hc),
		gl.WithoutRetries(), gl.WithCustomLimiter(unlimited{}), gl.WithUserAgent("hyperfleet"))
	if err != nil {
		return nil, fmt.Errorf("gitlab: %w", err)
	}
	return c, nil
}

// URL is the instance root handed to VMs' runners.
func (c *Client) URL() string { return c.cfg.URL }

// Host is the instance's host (and port), the key of its job claims and webhook routing.
func (c *Client) Host() string {
	u, _ := url.Parse(c.cfg.URL)
	return strings.ToLower(u.Host)
}

// RateLimitRemaining is RateLimit-Remaining from the last response, for metrics; ok is false
// before the first response that carried it.
func (c *Client) RateLimitRemaining() (remaining int, ok bool) {
	v := c.remaining.Load()
	return int(v), v >= 0
}

// unlimited is a rate limiter that never waits (see NewClient).
type unlimited struct{}

func (unlimited) Wait(context.Context) error { return nil }

// rateObserver records RateLimit-Remaining of every response.
type rateObserver struct {
	next      http.RoundTripper
	remaining *atomic.Int64
}

func (o rateObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if err == nil && resp != nil {
		if v, perr := strconv.ParseInt(resp.Header.Get("RateLimit-Remaining"), 10, 64); perr == nil {
			o.remaining.Store(v)
		}
	}
	return resp, err
}

// DefaultRetryAfter is how long a 429 without Retry-After or RateLimit-Reset waits: GitLab's
// budgets are per minute.
const DefaultRetryAfter = time.Minute

// classify wraps a client-go error in a platform.Error whose class controllers act on.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	pe := &platform.Error{Op: op, Err: err, Class: platform.ErrTransient}
	var apiErr *gl.ErrorResponse
	switch {
	case errors.Is(err, gl.ErrNotFound):
		pe.Class, pe.StatusCode = platform.ErrNotFound, http.StatusNotFound
	case errors.As(err, &apiErr) && apiErr.Response != nil:
		pe.StatusCode = apiErr.Response.StatusCode
		pe.Class = classifyStatus(pe.StatusCode)
		if pe.StatusCode == http.StatusTooManyRequests {
			pe.RetryAt = retryAt(apiErr.Response.Header, time.Now())
		}
	}
	pe.Err = platform.MarkTLS(err)
	return pe
}

// retryAt reads when a throttled request may be retried: Retry-After (seconds), else
// RateLimit-Reset (a Unix time), else a minute from now.
func retryAt(h http.Header, now time.Time) time.Time {
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		return now.Add(time.Duration(s) * time.Second)
	}
	if t, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		return t
	}
	if unix, err := strconv.ParseInt(strings.TrimSpace(h.Get("RateLimit-Reset")), 10, 64); err == nil && unix > 0 {
		return time.Unix(unix, 0)
	}
	return now.Add(DefaultRetryAfter)
}

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
