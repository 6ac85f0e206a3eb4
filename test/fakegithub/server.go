package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Options configures a fake GitHub. The zero value is usable: it generates an App key, uses App
// ID 1, one-hour installation tokens, 5000 requests per hour per installation and no webhooks.
type Options struct {
	// AppID is the GitHub App's ID, checked as the JWT issuer. Default 1.
	AppID int64
	// AppKeyPEM is the App's RSA private key in PEM (PKCS#1 or PKCS#8). Generated when empty.
	AppKeyPEM []byte
	// TokenTTL is the lifetime of installation tokens. Default one hour, like GitHub.
	TokenTTL time.Duration
	// RateLimit is the hourly request budget per installation. Default 5000.
	RateLimit int
	// JITPerWindow, when set, limits how many JIT runner configs one installation may create per
	// JITWindow (default a minute), as GitHub does (about 170–180 a minute per App): beyond it
	// the request is refused with 403 and Retry-After, GitHub's secondary rate limit. Load-model
	// runs set it (and shorten the window by their time scale); zero means no limit.
	JITPerWindow int
	JITWindow    time.Duration
	// WebhookURL receives signed workflow_job events when set; WebhookSecret signs them.
	WebhookURL    string
	WebhookSecret string
	// WebhookClient sends the webhooks; default a client with GitHub's 10 s delivery timeout.
	WebhookClient *http.Client
	// TLS serves HTTPS with a generated self-signed certificate for 127.0.0.1 (see CACertPEM).
	TLS bool
	// Clock returns the current time; default time.Now. Tests move it to expire tokens.
	Clock func() time.Time
	// Logger receives one line per request at debug level; default discards.
	Logger *slog.Logger
	// SharedRunnerKey gives every runner's JIT config the same RSA key instead of a new 2048-bit
	// key each (about 80 ms of CPU per runner): for load runs that register thousands of runners.
	// Each client assertion is still verified, and names its runner by its own client ID.
	SharedRunnerKey bool
	// RecordJITConfigs keeps every encoded_jit_config the fake issued, after its runner is gone
	// too (IssuedJITConfig), for tests that look for it where it should not be.
	RecordJITConfigs bool
}

// Server is a running (or ready to run) fake GitHub API.
type Server struct {
	opts     Options
	appKey   *rsa.PrivateKey
	appKeyPE []byte
	mux      *http.ServeMux
	log      *slog.Logger

	http fakeserver.HTTPServer

	hooks *fakeserver.Queue[pendingHook]

	mu            sync.Mutex
	nextID        map[string]int64
	installations map[string]*Installation // by lower-cased account
	repos         map[string]string        // lower-cased full name -> canonical full name
	tokens        map[string]*installToken
	rate          map[int64]*rateBucket
	runners       map[int64]*Runner
	jobs          map[int64]*Job
	runs          map[int64]*workflowRun
	labelIDs      map[string]int64
	faults        map[string][]Fault
	requests      map[string]int
	notModified   map[string]int
	credentialed  int
	deliveries    []Delivery
	// jitTimes are the recent JIT config creations per installation; jitRefused counts refusals.
	jitTimes   map[int64][]time.Time
	jitRefused int

	issued        map[int64]string // encoded JIT configs by runner ID, with RecordJITConfigs
	sharedKeyOnce sync.Once
	sharedKey     *rsa.PrivateKey
	sharedKeyErr  error
}

// New creates a fake GitHub without listening yet.
func New(opts Options) (*Server, error) {
	if opts.AppID == 0 {
		opts.AppID = 1
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = 5000
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
		opts: opts,
		log:  opts.Logger,
		// Installation IDs are unique across GitHub, so two fakes (two Apps) never share one.
		nextID:        map[string]int64{"installation": installationBase(), "runner": 0, "job": 10000, "run": 5000, "label": 0},
		installations: map[string]*Installation{},
		repos:         map[string]string{},
		tokens:        map[string]*installToken{},
		rate:          map[int64]*rateBucket{},
		runners:       map[int64]*Runner{},
		jobs:          map[int64]*Job{},
		runs:          map[int64]*workflowRun{},
		labelIDs:      map[string]int64{},
		faults:        map[string][]Fault{},
		requests:      map[string]int{},
		notModified:   map[string]int{},
	}
	if err := s.loadOrGenerateKey(opts.AppKeyPEM); err != nil {
		return nil, err
	}
	s.hooks = fakeserver.NewQueue(s.sendHook)
	s.hooks.Start()
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

func (s *Server) loadOrGenerateKey(keyPEM []byte) error {
	if len(keyPEM) == 0 {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return fmt.Errorf("generating App key: %w", err)
		}
		s.appKey = key
		s.appKeyPE = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		return nil
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return errors.New("App key: no PEM block")
	}
	if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		s.appKey, s.appKeyPE = key, keyPEM
		return nil
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("App key: %w", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return errors.New("App key: not an RSA key")
	}
	s.appKey, s.appKeyPE = key, keyPEM
	return nil
}

// Start listens on addr ("" means 127.0.0.1:0) and serves in the background.
func (s *Server) Start(addr string) error {
	return s.http.Start(addr, s.opts.TLS, "fake-github", s)
}

// StartForTest starts a fake on a loopback port and closes it when the test ends.
func StartForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("fake GitHub: %v", err)
	}
	fakeserver.StartForTest(t, "fake GitHub", s.Start, s.Close)
	return s
}

// Close stops serving and drops webhooks not yet delivered.
func (s *Server) Close() {
	s.http.Close()
	s.hooks.Stop()
}

// URL is the API root without a trailing slash, e.g. http://127.0.0.1:8090; use it as the
// go-github BaseURL (with a trailing slash) and as the ghinstallation BaseURL.
func (s *Server) URL() string { return s.http.URL() }

// CACertPEM is the certificate to trust when Options.TLS is set.
func (s *Server) CACertPEM() []byte { return s.http.CACertPEM() }

// AppID is the App's ID.
func (s *Server) AppID() int64 { return s.opts.AppID }

// AppKeyPEM is the App's private key, to hand to the client under test.
func (s *Server) AppKeyPEM() []byte { return append([]byte(nil), s.appKeyPE...) }

// HTTPClient returns a client that trusts the fake's certificate (a plain client without TLS),
// for tests and tools calling the /_fake/ endpoints.
func (s *Server) HTTPClient() *http.Client { return s.http.Client() }

// CredentialedRequests is how many requests carried an Authorization header (an App JWT or an
// installation token) to the fake, whatever the endpoint.
func (s *Server) CredentialedRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.credentialed
}

// ServeHTTP makes the fake usable as a plain http.Handler (for example under httptest).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path)
	if r.Header.Get("Authorization") != "" {
		s.mu.Lock()
		s.credentialed++
		s.mu.Unlock()
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) now() time.Time { return s.opts.Clock() }

func (s *Server) newID(kind string) int64 {
	s.nextID[kind]++
	return s.nextID[kind]
}

// InstallationID returns the App's installation on the account owning scope ("org" or
// "owner/name"), installing the App there first if needed.
func (s *Server) InstallationID(scope string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installLocked(scopeOwner(scope)).ID
}

// Uninstall removes the App from an account and revokes its tokens, to test "not installed".
func (s *Server) Uninstall(account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.installations[strings.ToLower(account)]
	if !ok {
		return
	}
	delete(s.installations, strings.ToLower(account))
	for _, t := range s.tokens {
		if t.installationID == inst.ID {
			t.revoked = true
		}
	}
}

// RevokeTokens invalidates every installation token issued so far, as when a key is rotated.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		t.revoked = true
	}
}

func (s *Server) installLocked(account string) *Installation {
	key := strings.ToLower(account)
	if inst, ok := s.installations[key]; ok {
		return inst
	}
	inst := &Installation{ID: s.newID("installation"), Account: account}
	s.installations[key] = inst
	return inst
}

// AddRepository makes a repository known (and installs the App on its owner) without jobs.
func (s *Server) AddRepository(repo string) {
	if _, _, ok := splitRepo(repo); !ok {
		panic(fmt.Sprintf("fakegithub: repository %q is not owner/name", repo))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addRepoLocked(repo)
}

func (s *Server) addRepoLocked(repo string) string {
	if canon, ok := s.repos[strings.ToLower(repo)]; ok {
		return canon
	}
	s.repos[strings.ToLower(repo)] = repo
	s.installLocked(scopeOwner(repo))
	return repo
}

// installationBase starts a fake's installation IDs at a random multiple of 1000 (plus 100).
func installationBase() int64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return 100
	}
	return 100 + 1000*(1+n.Int64())
}
