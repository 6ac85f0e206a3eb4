package fakebuildkite

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Options configures a fake Buildkite. The zero value is usable: organization "acme", one
// cluster, 200 REST requests per minute per API token, no webhooks, plain HTTP.
type Options struct {
	// Organization is the organization slug. Default "acme".
	Organization string
	// ClusterID is the UUID of the organization's one cluster; generated when empty.
	ClusterID string
	// RateLimit is the REST API budget per API token per minute (Buildkite's default is 200).
	RateLimit int
	// WebhookURL receives job.* events when set; WebhookToken authenticates them.
	WebhookURL   string
	WebhookToken string
	// WebhookSignature sends X-Buildkite-Signature (HMAC of "<timestamp>.<body>" keyed by the
	// token) instead of the plain X-Buildkite-Token header.
	WebhookSignature bool
	// WebhookClient sends the webhooks; default a client with a 10 s timeout.
	WebhookClient *http.Client
	// TLS serves HTTPS with a generated self-signed certificate for 127.0.0.1 (see CACertPEM).
	TLS bool
	// Clock returns the current time; default time.Now.
	Clock func() time.Time
	// Logger receives one line per request at debug level; default discards.
	Logger *slog.Logger
}

// Server is a running (or ready to run) fake Buildkite.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	started time.Time // the organization's creation date
	log     *slog.Logger

	http fakeserver.HTTPServer

	hooks *fakeserver.Queue[pendingHook]

	mu           sync.Mutex
	apiTokens    map[string][]string // API access token -> scopes
	rate         map[string]*rateBucket
	clusterToks  map[string]*ClusterToken // by ID
	agents       map[string]*Agent        // by ID
	pipelines    map[string]*Pipeline     // by slug
	builds       []*Build
	jobs         map[string]*Job
	faults       map[string][]Fault
	requests     map[string]int
	deliveries   []Delivery
	buildNumbers map[string]int
}

// New creates a fake Buildkite without listening yet.
func New(opts Options) *Server {
	if opts.Organization == "" {
		opts.Organization = "acme"
	}
	if opts.ClusterID == "" {
		opts.ClusterID = NewUUID()
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = 200
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WebhookClient == nil {
		opts.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{
		opts:         opts,
		started:      opts.Clock(),
		log:          opts.Logger,
		apiTokens:    map[string][]string{},
		rate:         map[string]*rateBucket{},
		clusterToks:  map[string]*ClusterToken{},
		agents:       map[string]*Agent{},
		pipelines:    map[string]*Pipeline{},
		jobs:         map[string]*Job{},
		faults:       map[string][]Fault{},
		requests:     map[string]int{},
		buildNumbers: map[string]int{},
	}
	s.hooks = fakeserver.NewQueue(s.sendHook)
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Start listens on addr ("" means 127.0.0.1:0) and serves in the background.
func (s *Server) Start(addr string) error {
	if err := s.http.Start(addr, s.opts.TLS, "fake-buildkite", s); err != nil {
		return err
	}
	s.hooks.Start()
	return nil
}

// StartForTest starts a fake on a loopback port and closes it when the test ends.
func StartForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	s := New(opts)
	fakeserver.StartForTest(t, "fake Buildkite", s.Start, s.Close)
	return s
}

// Close stops serving and drops webhooks not yet delivered.
func (s *Server) Close() {
	s.http.Close()
	s.hooks.Stop()
}

// URL is the root of both APIs, e.g. https://127.0.0.1:8443: the REST API lives under /v2/
// (go-buildkite's base URL is URL()+"/") and the agent API under /v3/ (AgentEndpoint).
func (s *Server) URL() string { return s.http.URL() }

// AgentEndpoint is the agent API root a buildkite-agent is started with (--endpoint).
func (s *Server) AgentEndpoint() string { return s.URL() + "/v3" }

// CACertPEM is the certificate to trust when Options.TLS is set.
func (s *Server) CACertPEM() []byte { return s.http.CACertPEM() }

// Organization is the organization slug.
func (s *Server) Organization() string { return s.opts.Organization }

// ClusterID is the UUID of the organization's cluster.
func (s *Server) ClusterID() string { return s.opts.ClusterID }

// HTTPClient returns a client that trusts the fake's certificate (a plain client without TLS).
func (s *Server) HTTPClient() *http.Client { return s.http.Client() }

// ServeHTTP makes the fake usable as a plain http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path)
	s.mux.ServeHTTP(w, r)
}

func (s *Server) now() time.Time { return s.opts.Clock() }

// SetWebhook points job deliveries at url (empty disables them), for receivers that start
// after the fake; signature chooses X-Buildkite-Signature over X-Buildkite-Token.
func (s *Server) SetWebhook(url, token string, signature bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.WebhookURL, s.opts.WebhookToken, s.opts.WebhookSignature = url, token, signature
}

// AddAPIToken creates a REST API access token with the given scopes (read_clusters,
// write_clusters, read_agents, write_agents, read_builds, ...) and returns its value.
func (s *Server) AddAPIToken(scopes ...string) string {
	tok := "bkua_" + randomHex(20)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiTokens[tok] = append([]string(nil), scopes...)
	return tok
}

// RevokeAPIToken makes an API token unknown, as deleting it in Buildkite does.
func (s *Server) RevokeAPIToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apiTokens, tok)
}

// NewUUID returns a random version 4 UUID, the shape of every Buildkite ID.
func NewUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
