package console

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
)

// Options assemble a Server.
type Options struct {
	Settings Settings
	// Config authenticates as the console's ServiceAccount: it impersonates people and reads the
	// inventory.
	Config *rest.Config
	Scheme *runtime.Scheme
	// OIDCClient talks to the identity provider; nil for a default client.
	OIDCClient *http.Client
	Log        logr.Logger
	// OpenHistory opens the audit log's store; nil for history.Open.
	OpenHistory func(ctx context.Context, url string) (history.Store, error)
}

// Server is the console: API, UI and sign-in.
type Server struct {
	settings  Settings
	auth      *Authenticator
	kube      *kube
	inventory *Inventory
	// audit writes the audit log and reads it back.
	audit *auditQueue
	// publicKeys reads the installation's public keys, as the console's ServiceAccount, to check
	// the signatures of job records.
	publicKeys func(ctx context.Context) ([]crypto.PublicKey, error)
	log        logr.Logger
	mux        *http.ServeMux
	// routes are the API's operations, the ones the OpenAPI document describes.
	routes []route
	// shuttingDown is closed when Serve starts to shut down: streaming job logs end then (their
	// browsers reconnect to the next console), so graceful shutdown does not wait for them.
	shuttingDown chan struct{}
	shutdownOnce sync.Once
}

// route is one API operation.
type route struct {
	Method, Path string
	// Change marks operations that change something: refused to the read-only role, and recorded
	// in the audit log as Audit says, whatever the answer.
	Change  bool
	Audit   auditSpec
	Handler func(w http.ResponseWriter, r *http.Request, c *caller)
}

// caller is an authenticated request's person with a client acting as them.
type caller struct {
	authenticated
	Client client.Client
	// note is the audit entry of a change, nil for a read.
	note *auditNote
}

// New prepares a Server: it discovers the identity provider, so the issuer must answer.
func New(ctx context.Context, o Options) (*Server, error) {
	if err := o.Settings.Validate(); err != nil {
		return nil, err
	}
	auth, err := NewAuthenticator(ctx, o.Settings, o.OIDCClient)
	if err != nil {
		return nil, err
	}
	k, err := newKube(o.Config, o.Scheme)
	if err != nil {
		return nil, err
	}
	reader, err := client.New(o.Config, client.Options{Scheme: o.Scheme, Mapper: k.mapper})
	if err != nil {
		return nil, err
	}
	s := &Server{settings: o.Settings, auth: auth, kube: k, log: o.Log, shuttingDown: make(chan struct{}),
		inventory: NewInventory(reader, o.Settings.InventoryRefreshInterval, 15*time.Second)}
	if key, ok := o.Settings.sessionRevocationsKey(); ok {
		auth.revocations = newRevocations(reader, key)
	}
	auth.errorPage = func(w http.ResponseWriter, status int, title, detail string) {
		s.render(w, status, "signinerror", nil, title, "", detail)
	}
	open := o.OpenHistory
	if open == nil {
		open = history.Open
	}
	s.audit = newAuditQueue(o.Settings.HistoryURL, open, o.Log.WithName("audit"))
	// One attempt now, so a console whose database answers serves its audit log from the start;
	// the queue keeps trying in Serve when this one fails.
	if err := s.audit.openStore(ctx); err != nil {
		o.Log.Error(err, "audit log unavailable: changes are queued until it opens, the audit API answers 503", "url", redactURL(o.Settings.HistoryURL))
	}
	namespace := cmp.Or(o.Settings.Namespace, DefaultNamespace)
	s.publicKeys = func(ctx context.Context) ([]crypto.PublicKey, error) {
		return custody.PublicKeys(ctx, reader, namespace)
	}
	s.routes = append(s.apiRoutes(), s.historyRoutes()...)
	s.mux = http.NewServeMux()
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.Method+" "+rt.Path, s.api(rt))
	}
	s.mux.HandleFunc("/api/v1/audit", auditIsAppendOnly("GET, HEAD"))
	s.mux.HandleFunc("/api/v1/audit/{id}", auditIsAppendOnly(""))
	registerHistoryReadOnly(s.mux)
	s.mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /oidc/login", auth.startLogin)
	s.mux.HandleFunc("GET /oidc/callback", auth.callback)
	s.mux.HandleFunc("POST /oidc/logout", s.ui(false, func(w http.ResponseWriter, r *http.Request, c *caller) { auth.logout(w, r, c.authenticated) }))
	s.registerUI()
	return s, nil
}

// Operations lists the API's operations as "METHOD /path", sorted: the OpenAPI document must
// describe exactly these.
func (s *Server) Operations() []string {
	ops := []string{"GET /api/v1/openapi.json"}
	for _, rt := range s.routes {
		ops = append(ops, rt.Method+" "+rt.Path)
	}
	sort.Strings(ops)
	return ops
}

// Inventory is the hypervisor inventory the server reads; run it with Start.
func (s *Server) Inventory() *Inventory { return s.inventory }

// Handler serves the console.
func (s *Server) Handler() http.Handler { return securityHeaders(s.mux) }

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if !s.inventory.Ready() {
		http.Error(w, "inventory not read yet", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// api wraps an API operation: authentication, role, CSRF for browser sessions, impersonation.
func (s *Server) api(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, status, err := s.callerOf(r, rt.Change)
		refuse := func(w http.ResponseWriter) {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="hyperfleet-console"`)
			}
			writeProblem(w, r, status, http.StatusText(status), err.Error(), nil)
		}
		switch {
		case rt.Change && c != nil:
			s.audited(rt.Audit, w, r, c.Principal, func(w http.ResponseWriter, note *auditNote) {
				if err != nil {
					refuse(w)
					return
				}
				c.note = note
				rt.Handler(w, r, c)
			})
		case err != nil:
			refuse(w)
		default:
			rt.Handler(w, r, c)
		}
	}
}

// callerOf authenticates r and decides whether it may go on; the status says why not. A person
// refused after they were known (role, CSRF) comes back with the error, without a client, so the
// refusal can be recorded as theirs.
func (s *Server) callerOf(r *http.Request, change bool) (*caller, int, error) {
	au, err := s.auth.authenticate(r)
	switch {
	case errors.Is(err, errUnauthenticated):
		return nil, http.StatusUnauthorized, err
	case errors.Is(err, errRevocationsUnavailable):
		return nil, http.StatusServiceUnavailable, err
	case err != nil:
		return nil, http.StatusForbidden, err
	}
	if err := checkCSRF(r, au); err != nil {
		return &caller{authenticated: au}, http.StatusForbidden, err
	}
	if change && au.Principal.ReadOnly {
		return &caller{authenticated: au}, http.StatusForbidden, errors.New("your role may look but not change anything")
	}
	c, err := s.kube.clientFor(au.Principal)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	return &caller{authenticated: au, Client: c}, 0, nil
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
		next.ServeHTTP(w, r)
	})
}

// Serve serves the console on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Job logs stream longer: they extend their own write deadline.
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 32 << 10,
	}
	srv.RegisterOnShutdown(func() { s.shutdownOnce.Do(func() { close(s.shuttingDown) }) })
	// The audit queue outlives the server by the changes still being answered: it stops after
	// Shutdown, then writes what is queued.
	auditCtx, stopAudit := context.WithCancel(context.WithoutCancel(ctx))
	auditDone := make(chan struct{})
	go func() { s.audit.run(auditCtx); close(auditDone) }()
	defer func() { stopAudit(); <-auditDone }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
