package buildkite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Defaults for Buildkite's hosted service.
const (
	DefaultBaseURL       = "https://api.buildkite.com/"
	DefaultAgentEndpoint = "https://agent.buildkite.com/v3"
	DefaultHTTPTimeout   = 30 * time.Second
)

// Config is how HyperFleet reaches one Buildkite organization's cluster.
type Config struct {
	// BaseURL is the REST API root (DefaultBaseURL when empty).
	BaseURL string
	// AgentEndpoint is the agent API root VMs register with and metrics are read from
	// (DefaultAgentEndpoint when empty).
	AgentEndpoint string
	// Organization is the organization slug; ClusterID the UUID of the cluster whose agent
	// tokens HyperFleet creates and whose queues its pools serve.
	Organization string
	ClusterID    string
	// APIToken is a REST API access token (Bearer), least privilege: read_clusters,
	// write_clusters, read_builds (and read_agents to list agents).
	APIToken string
	// AllowInsecureHTTP permits http:// URLs; otherwise they are refused before any request,
	// since the token would travel in clear text.
	AllowInsecureHTTP bool
	// HTTPTimeout bounds each request; DefaultHTTPTimeout when zero.
	HTTPTimeout time.Duration
	// Transport is the base round tripper (a CA bundle, a proxy); a clone of the default when nil.
	Transport http.RoundTripper
	// AgentCAPEM is the CA bundle that signs the agent endpoint's certificate, handed to each VM
	// in its AgentConfig when the pool names one (a private Buildkite endpoint); nil means the
	// VM's system roots.
	AgentCAPEM []byte
}

// Client talks to one Buildkite organization as one API token. It is safe for concurrent use.
type Client struct {
	cfg  Config
	bk   *bk.Client
	http *http.Client
	// remaining is RateLimit-Remaining of the last REST response, -1 before any.
	remaining atomic.Int64
}

// NewClient validates the configuration; it makes no request.
func NewClient(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if !strings.HasSuffix(cfg.BaseURL, "/") {
		cfg.BaseURL += "/"
	}
	if cfg.AgentEndpoint == "" {
		cfg.AgentEndpoint = DefaultAgentEndpoint
	}
	cfg.AgentEndpoint = strings.TrimSuffix(cfg.AgentEndpoint, "/")
	switch {
	case cfg.Organization == "" || strings.Contains(cfg.Organization, "/"):
		return nil, fmt.Errorf("%w: organization slug %q", platform.ErrCredentials, cfg.Organization)
	case cfg.ClusterID == "" || strings.Contains(cfg.ClusterID, "/"):
		return nil, fmt.Errorf("%w: cluster ID %q", platform.ErrCredentials, cfg.ClusterID)
	case strings.TrimSpace(cfg.APIToken) == "":
		return nil, fmt.Errorf("%w: no API token", platform.ErrCredentials)
	}
	for _, u := range []string{cfg.BaseURL, cfg.AgentEndpoint} {
		if platform.IsPlainHTTP(u) && !cfg.AllowInsecureHTTP {
			return nil, fmt.Errorf("%w: %s", platform.ErrInsecureURL, u)
		}
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = DefaultHTTPTimeout
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	c := &Client{cfg: cfg}
	c.remaining.Store(-1)
	c.http = &http.Client{Transport: rateGuard{next: cfg.Transport, remaining: &c.remaining}, Timeout: cfg.HTTPTimeout}
	var err error
	c.bk, err = bk.NewClient(bk.WithBaseURL(cfg.BaseURL), bk.WithTokenAuth(strings.TrimSpace(cfg.APIToken)),
		bk.WithHTTPClient(c.http), bk.WithUserAgent("hyperfleet"))
	if err != nil {
		return nil, fmt.Errorf("buildkite: %w", err)
	}
	return c, nil
}

// Organization is the organization slug the client serves.
func (c *Client) Organization() string { return c.cfg.Organization }

// AgentEndpoint is the agent API root handed to VMs.
func (c *Client) AgentEndpoint() string { return c.cfg.AgentEndpoint }

// RateLimitRemaining is RateLimit-Remaining from the last REST response, for metrics; ok is
// false before the first response.
func (c *Client) RateLimitRemaining() (remaining int, ok bool) {
	v := c.remaining.Load()
	return int(v), v >= 0
}

// RateLimitedError is a 429 from Buildkite, with when the budget is refilled.
type RateLimitedError struct {
	RetryAt time.Time
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("Buildkite API rate limit exceeded until %s", e.RetryAt.UTC().Format(time.RFC3339))
}

// rateGuard turns a 429 into an error before go-buildkite sees the response: the client
// retries throttled GETs itself with an exponential backoff of up to fifteen minutes, which
// would hold a reconcile hostage and keep spending the budget. HyperFleet instead surfaces
// platform.ErrRateLimited with RetryAt and comes back when the budget is refilled.
type rateGuard struct {
	next      http.RoundTripper
	remaining *atomic.Int64
}

func (g rateGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if v, perr := strconv.ParseInt(resp.Header.Get("RateLimit-Remaining"), 10, 64); perr == nil {
		g.remaining.Store(v)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		return resp, nil
	}
	_ = resp.Body.Close()
	wait := time.Minute // Buildkite's budget is per minute
	if s, perr := strconv.Atoi(resp.Header.Get("RateLimit-Reset")); perr == nil && s >= 0 {
		wait = time.Duration(s) * time.Second
	}
	return nil, &RateLimitedError{RetryAt: time.Now().Add(wait)}
}

// classify wraps a go-buildkite error in a platform.Error whose class controllers act on.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	pe := &platform.Error{Op: op, Err: err, Class: platform.ErrTransient}
	var limited *RateLimitedError
	var apiErr *bk.ErrorResponse
	switch {
	case errors.As(err, &limited):
		pe.Class, pe.StatusCode, pe.RetryAt = platform.ErrRateLimited, http.StatusTooManyRequests, limited.RetryAt
	case errors.As(err, &apiErr) && apiErr.Response != nil:
		pe.StatusCode = apiErr.Response.StatusCode
		pe.Class = classifyStatus(pe.StatusCode)
	case errors.Is(err, context.Canceled):
		return err
	}
	pe.Err = platform.MarkTLS(err)
	return pe
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
