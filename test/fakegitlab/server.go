package fakegitlab

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Options configures a fake GitLab. The zero value is usable: 2,000 authenticated API requests
// per minute per user (GitLab.com's limit), no webhooks, plain HTTP.
type Options struct {
	// RateLimit is the authenticated REST API budget per user per minute, shared by all of the
	// user's tokens.
	RateLimit int
	// WebhookURL receives Job Hook deliveries when set; WebhookToken is sent as X-Gitlab-Token.
	WebhookURL   string
	WebhookToken string
	// WebhookClient sends the webhooks; default a client with a 10 s timeout.
	WebhookClient *http.Client
	// TLS serves HTTPS with a generated self-signed certificate for 127.0.0.1 (see CACertPEM).
	TLS bool
	// Clock returns the current time; default time.Now.
	Clock func() time.Time
	// Logger receives one line per request at debug level; default discards.
	Logger *slog.Logger
}

// accessToken is a personal, group or project access token of one user.
type accessToken struct {
	scopes  []string
	user    int64
	admin   bool
	revoked bool
}

// Server is a running (or ready to run) fake GitLab.
type Server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger

	http fakeserver.HTTPServer

	hooks *fakeserver.Queue[pendingHook]

	mu         sync.Mutex
	tokens     map[string]accessToken
	users      map[int64]*User
	rate       map[int64]*rateBucket
	groups     map[int64]*Group
	projects   map[int64]*Project
	runners    map[int64]*Runner
	jobs       map[int64]*Job
	nextID     int64
	faults     map[string][]Fault
	requests   map[string]int
	deliveries []Delivery
}

// New creates a fake GitLab without listening yet.
func New(opts Options) *Server {
	if opts.RateLimit == 0 {
		opts.RateLimit = 2000
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
		opts:     opts,
		log:      opts.Logger,
		tokens:   map[string]accessToken{},
		users:    map[int64]*User{},
		rate:     map[int64]*rateBucket{},
		groups:   map[int64]*Group{},
		projects: map[int64]*Project{},
		runners:  map[int64]*Runner{},
		jobs:     map[int64]*Job{},
		nextID:   100,
		faults:   map[string][]Fault{},
		requests: map[string]int{},
	}
	s.hooks = fakeserver.NewQueue(s.sendHook)
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Start listens on addr ("" means 127.0.0.1:0) and serves in the background.
func (s *Server) Start(addr string) error {
	if err := s.http.Start(addr, s.opts.TLS, "fake-gitlab", s); err != nil {
		return err
	}
	s.hooks.Start()
	return nil
}

// StartForTest starts a fake on a loopback port and closes it when the test ends.
func StartForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	s := New(opts)
	fakeserver.StartForTest(t, "fake GitLab", s.Start, s.Close)
	return s
}

// Close stops serving and drops webhooks not yet delivered.
func (s *Server) Close() {
	s.http.Close()
	s.hooks.Stop()
}

// URL is the instance's root, e.g. https://127.0.0.1:8443, which gitlab-runner is given as
// --url; the REST API lives under URL()+"/api/v4".
func (s *Server) URL() string { return s.http.URL() }

// APIURL is the REST API root the GitLab Go client takes as its base URL.
func (s *Server) APIURL() string { return s.URL() + "/api/v4" }

// CACertPEM is the certificate to trust when Options.TLS is set.
func (s *Server) CACertPEM() []byte { return s.http.CACertPEM() }

// HTTPClient returns a client that trusts the fake's certificate (a plain client without TLS).
func (s *Server) HTTPClient() *http.Client { return s.http.Client() }

// ServeHTTP makes the fake usable as a plain http.Handler. A request under /api/ that no
// endpoint serves is answered as GitLab's API answers it (see serveUnrouted).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path)
	if h, pattern := s.mux.Handler(r); pattern == "" && strings.HasPrefix(r.URL.Path, "/api/") {
		serveUnrouted(w, r, h)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) now() time.Time { return s.opts.Clock() }

// SetWebhook points Job Hook deliveries at url (empty disables them) with secret token.
func (s *Server) SetWebhook(url, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.WebhookURL, s.opts.WebhookToken = url, token
}

// Token scopes the fake enforces. api grants everything, read_api every GET.
const (
	ScopeAPI          = "api"
	ScopeReadAPI      = "read_api"
	ScopeCreateRunner = "create_runner"
	ScopeManageRunner = "manage_runner"
	ScopeReadUser     = "read_user"
)

func (s *Server) newIDLocked() int64 {
	s.nextID++
	return s.nextID
}

// AddGroup creates a group and any missing parents ("acme/platform" creates acme too).
func (s *Server) AddGroup(fullPath string) Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addGroupLocked(fullPath)
}

func (s *Server) addGroupLocked(fullPath string) *Group {
	if g := s.groupLocked(fullPath); g != nil {
		return g
	}
	var parent int64
	if i := strings.LastIndex(fullPath, "/"); i > 0 {
		parent = s.addGroupLocked(fullPath[:i]).ID
	}
	g := &Group{ID: s.newIDLocked(), FullPath: fullPath, ParentID: parent}
	s.groups[g.ID] = g
	return g
}

// AddProject creates a project "group/.../name" and its groups. main is a protected branch,
// as in a new GitLab project.
func (s *Server) AddProject(pathWithNamespace string) Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projectLocked(pathWithNamespace); p != nil {
		return *p
	}
	i := strings.LastIndex(pathWithNamespace, "/")
	if i <= 0 {
		panic(fmt.Sprintf("fake GitLab: project %q needs a group", pathWithNamespace))
	}
	p := &Project{ID: s.newIDLocked(), PathWithNamespace: pathWithNamespace,
		GroupID: s.addGroupLocked(pathWithNamespace[:i]).ID, ProtectedBranches: []string{"main"}, CreatedAt: s.now()}
	s.projects[p.ID] = p
	return *p
}

// ProtectRef adds a protected branch (or, with tag, tag) pattern to a project.
func (s *Server) ProtectRef(project, pattern string, tag bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectLocked(project)
	if p == nil {
		panic("fake GitLab: no project " + project)
	}
	if tag {
		p.ProtectedTags = append(p.ProtectedTags, pattern)
	} else {
		p.ProtectedBranches = append(p.ProtectedBranches, pattern)
	}
}

// CreateJob adds a job in a new pipeline of project and sends its Job Hook.
func (s *Server) CreateJob(project string, spec JobSpec) Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectLocked(project)
	if p == nil {
		panic("fake GitLab: no project " + project)
	}
	if spec.Name == "" {
		spec.Name = "build"
	}
	if spec.Stage == "" {
		spec.Stage = "test"
	}
	if spec.Ref == "" {
		spec.Ref = "main"
	}
	if spec.Status == "" {
		spec.Status = JobPending
	}
	j := &Job{ID: s.newIDLocked(), ProjectID: p.ID, PipelineID: s.newIDLocked(), Name: spec.Name, Stage: spec.Stage,
		Ref: spec.Ref, Tag: spec.Tag, SHA: randomHex(20), Tags: slices.Clone(spec.Tags),
		Protected: refProtected(p, spec.Ref, spec.Tag), CreatedAt: s.now()}
	s.jobs[j.ID] = j
	s.setStatusLocked(j, spec.Status)
	return *j
}

// SetJobStatus moves a job, as a person playing a manual job, a schedule firing or a cancel
// would; it sends the Job Hook.
func (s *Server) SetJobStatus(id int64, st JobStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return false
	}
	s.setStatusLocked(j, st)
	return true
}

// AddRunner creates a runner as POST /user/runners would, for tests that need one without
// the API: ID and Token are generated, AccessLevel defaults to not_protected.
func (s *Server) AddRunner(r Runner) Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.ID = s.newIDLocked()
	r.Token = "glrt-" + randomHex(10)
	r.Tags = slices.Clone(r.Tags)
	if r.AccessLevel == "" {
		r.AccessLevel = AccessNotProtected
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	s.runners[r.ID] = &r
	return r
}

// GetJob returns a copy of a job.
func (s *Server) GetJob(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return Job{}, false
	}
	return *j, true
}

// Jobs returns copies of every job, oldest first.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b Job) int { return int(a.ID - b.ID) })
	return out
}

// Runners returns copies of every runner, oldest first.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Runner, 0, len(s.runners))
	for _, r := range s.runners {
		c := *r
		c.Tags = slices.Clone(r.Tags)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Runner) int { return int(a.ID - b.ID) })
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
