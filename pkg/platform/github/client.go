package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v66/github"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// DefaultBaseURL is github.com's REST API root.
const DefaultBaseURL = "https://api.github.com/"

// DefaultHTTPTimeout bounds every API call, token refresh included.
const DefaultHTTPTimeout = 30 * time.Second

// Config is how HyperFleet authenticates to GitHub as an App.
type Config struct {
	// BaseURL is the REST API root: DefaultBaseURL when empty, https://HOST/api/v3/ for GitHub
	// Enterprise Server, or the fake's URL in tests.
	BaseURL string
	AppID   int64
	// InstallationID pins one installation; 0 looks the installation up per scope (and caches
	// it), so one App can serve several organizations.
	InstallationID int64
	// PrivateKeyPEM is the App's RSA private key.
	PrivateKeyPEM []byte
	// HTTPTimeout bounds each request; DefaultHTTPTimeout when zero.
	HTTPTimeout time.Duration
	// Transport is the base round tripper, for custom TLS (a GHES CA) or proxies; a clone of
	// http.DefaultTransport when nil. App and installation authentication wrap it.
	Transport http.RoundTripper
}

// Client talks to one GitHub (github.com or GHES) as one App. It is safe for concurrent use.
type Client struct {
	cfg    Config
	apps   *gh.Client // authenticated as the App (JWT), for installation lookups
	appsTr *ghinstallation.AppsTransport
	limit  atomic.Int64 // X-RateLimit-Remaining of the last API response, -1 before any
	reset  atomic.Int64 // X-RateLimit-Reset (Unix seconds) of the last API response, 0 before any
	// conditional are the per-installation conditional-request caches (ETag / If-None-Match).
	conditional map[int64]*conditionalTransport
	mu          sync.Mutex
	clients     map[int64]*gh.Client // per installation
	budgets     map[int64]*budget    // per installation: the rate-limit headers of its last response
	tokens      map[int64]*ghinstallation.Transport
	// refused remembers, per account, a failed proof of installation for a while.
	refused map[string]refusal
	owners  map[string]int64 // lower-cased account -> installation ID
}

var _ platform.Platform = (*Client)(nil)

// NewClient validates the configuration and the App key; it makes no request.
func NewClient(cfg Config) (*Client, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("github: App ID is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if !strings.HasSuffix(cfg.BaseURL, "/") {
		cfg.BaseURL += "/"
	}
	if cfg.HTTPTimeout <= 0 {
		cfg.HTTPTimeout = DefaultHTTPTimeout
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	appsTr, err := ghinstallation.NewAppsTransport(cfg.Transport, cfg.AppID, cfg.PrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("github: App private key: %w", err)
	}
	appsTr.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	c := &Client{cfg: cfg, appsTr: appsTr, clients: map[int64]*gh.Client{}, tokens: map[int64]*ghinstallation.Transport{}, owners: map[string]int64{}, refused: map[string]refusal{}}
	c.limit.Store(-1)
	if c.apps, err = c.newGitHubClient(appsTr); err != nil {
		return nil, err
	}
	return c, nil
}

// Kind is platform.KindGitHub.
func (c *Client) Kind() platform.Kind { return platform.KindGitHub }

// ParseWebhook verifies and parses a delivery; see the package-level ParseWebhook.
func (c *Client) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// RateLimitRemaining is X-RateLimit-Remaining from the last installation API response, for
// metrics; ok is false before the first response.
func (c *Client) RateLimitRemaining() (remaining int, ok bool) {
	v := c.limit.Load()
	return int(v), v >= 0
}

// RateLimitReset is X-RateLimit-Reset from the last installation API response: when the
// current window's budget is renewed; ok is false before the first response.
func (c *Client) RateLimitReset() (time.Time, bool) {
	v := c.reset.Load()
	return time.Unix(v, 0), v > 0
}

// NotModified counts the GET requests GitHub answered 304 Not Modified (free of rate limit) and
// that were served from the conditional-request cache.
func (c *Client) NotModified() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, t := range c.conditional {
		n += t.notModified.Load()
	}
	return n
}

func (c *Client) newGitHubClient(tr http.RoundTripper) (*gh.Client, error) {
	client := gh.NewClient(&http.Client{Transport: tr, Timeout: c.cfg.HTTPTimeout})
	var err error
	if client.BaseURL, err = client.BaseURL.Parse(c.cfg.BaseURL); err != nil {
		return nil, fmt.Errorf("github: base URL: %w", err)
	}
	client.UploadURL = client.BaseURL
	return client, nil
}

// rateRecorder notes the rate-limit budget GitHub reports on every installation response: in the
// installation's budget, and as the client's last reading (for metrics).
type rateRecorder struct {
	next   http.RoundTripper
	store  *atomic.Int64
	reset  *atomic.Int64
	budget *budget
}

func (r rateRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if resp != nil {
		if v, perr := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64); perr == nil {
			r.store.Store(v)
			if r.budget != nil {
				r.budget.remaining.Store(v)
			}
		}
		if v, perr := strconv.ParseInt(resp.Header.Get("X-RateLimit-Limit"), 10, 64); perr == nil && r.budget != nil {
			r.budget.limit.Store(v)
		}
		if at, ok := rateReset(resp.Header); ok {
			if r.reset != nil {
				r.reset.Store(at.Unix())
			}
			if r.budget != nil {
				r.budget.reset.Store(at.Unix())
			}
		}
	}
	return resp, err
}

// budget is one installation's rate-limit window as its last response reported it; zero values
// mean not known yet (or a GitHub Enterprise Server with rate limits off, which sends none).
type budget struct {
	remaining, limit, reset atomic.Int64
}

// RepairReserveShare is the part of an installation's hourly budget the repair loop leaves
// untouched (and never less than LowBudget requests): runner registrations (JIT configurations,
// one per VM) and deregistrations come out of the same budget, and a burst must not fail them
// because a listing spent it.
const RepairReserveShare = 10 // percent

// reserved says whether the budget is down to its reserve, and when it is renewed.
func (b *budget) reserved() (bool, time.Time, string) {
	limit, remaining := b.limit.Load(), b.remaining.Load()
	if limit <= 0 {
		return false, time.Time{}, ""
	}
	// Never more than half the window: a small budget (a test installation, a GHES setting) is
	// still listed from.
	reserve := min(max(int64(LowBudget), limit*RepairReserveShare/100), limit/2)
	if remaining >= reserve {
		return false, time.Time{}, ""
	}
	return true, time.Unix(b.reset.Load(), 0), fmt.Sprintf("%d of %d requests left this window, %d kept for runner registrations", remaining, limit, reserve)
}

// clientFor returns a go-github client authenticated as the installation serving scope.
func (c *Client) clientFor(ctx context.Context, scope platform.Scope) (*gh.Client, error) {
	id, err := c.installationFor(ctx, scope)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if client, ok := c.clients[id]; ok {
		return client, nil
	}
	itr := ghinstallation.NewFromAppsTransport(c.appsTr, id)
	cond := newConditionalTransport(itr)
	b := &budget{}
	client, err := c.newGitHubClient(rateRecorder{next: cond, store: &c.limit, reset: &c.reset, budget: b})
	if err != nil {
		return nil, err
	}
	if c.conditional == nil {
		c.conditional = map[int64]*conditionalTransport{}
	}
	if c.budgets == nil {
		c.budgets = map[int64]*budget{}
	}
	c.budgets[id] = b
	c.clients[id], c.tokens[id], c.conditional[id] = client, itr, cond
	return client, nil
}

// refusal is a failed proof of installation and when it happened.
type refusal struct {
	err error
	at  time.Time
}

// RefusalTTL is how long a failed proof of installation is remembered: webhook routing asks for
// every delivery, and credentials that GitHub refuses (another team's IDs typed in, a wrong key)
// must not turn each delivery into calls to GitHub. A rotated Secret gets a new Client, so a fix
// takes effect at once.
const RefusalTTL = time.Minute

// Installation returns the ID of the App installation serving scope, proven: the App key has
// just minted (or holds an unexpired) installation token for it. Numbers written in a
// credentials Secret prove nothing, since anyone can type another team's App and installation
// IDs; only GitHub can say that a key belongs to the installation. Webhook routing relies on it.
func (c *Client) Installation(ctx context.Context, scope platform.Scope) (int64, error) {
	scope = scope.Effective()
	owner := strings.ToLower(scope.Owner())
	c.mu.Lock()
	r, ok := c.refused[owner]
	c.mu.Unlock()
	if ok && time.Since(r.at) < RefusalTTL {
		return 0, r.err
	}
	id, err := c.proveInstallation(ctx, scope)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.refused[owner] = refusal{err: err, at: time.Now()}
	} else {
		delete(c.refused, owner)
	}
	return id, err
}

func (c *Client) proveInstallation(ctx context.Context, scope platform.Scope) (int64, error) {
	if _, err := c.clientFor(ctx, scope); err != nil {
		return 0, err
	}
	id, err := c.installationFor(ctx, scope)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	itr := c.tokens[id]
	c.mu.Unlock()
	if itr == nil {
		return 0, fmt.Errorf("github: installation %d has no client", id)
	}
	if _, err := itr.Token(ctx); err != nil {
		err = classify(fmt.Sprintf("mint a token for installation %d", id), nil, err)
		c.forgetInstallation(scope, err)
		return 0, err
	}
	return id, nil
}

// installationFor resolves the App installation of the scope's account. An App has at most one
// installation per account, so the lookup is cached by account.
func (c *Client) installationFor(ctx context.Context, scope platform.Scope) (int64, error) {
	if c.cfg.InstallationID != 0 {
		return c.cfg.InstallationID, nil
	}
	owner := strings.ToLower(scope.Owner())
	c.mu.Lock()
	id, ok := c.owners[owner]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	var inst *gh.Installation
	var resp *gh.Response
	var err error
	if scope.IsRepository() {
		o, r := scope.RepositoryParts()
		inst, resp, err = c.apps.Apps.FindRepositoryInstallation(ctx, o, r)
	} else {
		inst, resp, err = c.apps.Apps.FindOrganizationInstallation(ctx, scope.Organization)
	}
	if err != nil {
		return 0, classify("find App installation for "+scope.String(), resp, err)
	}
	c.mu.Lock()
	c.owners[owner] = inst.GetID()
	c.mu.Unlock()
	return inst.GetID(), nil
}

// forgetInstallation drops the cached installation client (and its token) and the cached
// lookup after GitHub refuses our credentials, so the next call mints a fresh token and looks the
// installation up again: tokens can be revoked and the App reinstalled under a new ID.
func (c *Client) forgetInstallation(scope platform.Scope, err error) {
	if !errors.Is(err, platform.ErrUnauthorized) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	owner := strings.ToLower(scope.Owner())
	id := c.cfg.InstallationID
	if id == 0 {
		id = c.owners[owner]
		delete(c.owners, owner)
	}
	delete(c.clients, id)
	delete(c.tokens, id)
}

// budgetOf is the installation's budget, nil before its first client.
func (c *Client) budgetOf(id int64) *budget {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.budgets[id]
}
