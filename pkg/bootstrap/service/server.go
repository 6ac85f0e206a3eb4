package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// serverSVIDTTL is the life of the service's own certificate; it is renewed at half-life.
const serverSVIDTTL = 24 * time.Hour

// DefaultAPITimeout is Options.APITimeout's default.
const DefaultAPITimeout = 15 * time.Second

// Options configure a bootstrap service.
type Options struct {
	// Client reads and writes the API server directly. It must not be a cache: single-use
	// decisions need the latest resourceVersion.
	Client client.Client
	// CA signs the service's own certificate and is the trust bundle SVIDs are verified against.
	CA *identity.CA
	// Attestor redeems evidence and issues SVIDs (builtin.Attestor).
	Attestor identity.Attestor
	// SPIRE, instead of CA and Attestor, makes this the service for VMs attested by a SPIRE server
	// (BootstrapConfig provider SPIRE): its own SVID and the bundle it verifies VMs with come from
	// SPIRE's Workload API (a *workloadapi.X509Source), the VM's spire-agent attests so there is no
	// attestation endpoint, and only Machines whose BootstrapConfig names provider SPIRE are served.
	SPIRE SVIDSource
	// TPM runs TPM attestation (tpm.Attestor); its endpoints answer 404 when nil.
	TPM TPMAttestor
	// Platforms gives each RunnerPool its CI platform client (required). The process that
	// assembles the service instruments it once (instrumented.Source); the service does not.
	Platforms platform.Source
	// DNSNames and IPs are added to the service certificate for clients verifying by host name.
	DNSNames []string
	IPs      []net.IP
	// Limits rate-limit the endpoints unattested callers reach; zero fields take the defaults.
	Limits Limits
	// APITimeout bounds each status write that must finish after the request's own context ended
	// (recording the attestation, giving back a failed runner-config claim); DefaultAPITimeout
	// when zero.
	APITimeout time.Duration
	// Logger; discards when zero.
	Logger logr.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// SVIDSource gives the service its X509-SVID and the trust bundle of its trust domain.
type SVIDSource interface {
	x509svid.Source
	x509bundle.Source
}

// Server is a bootstrap service.
type Server struct {
	opts    Options
	td      spiffeid.TrustDomain
	svid    x509svid.Source
	bundle  x509bundle.Source
	spire   bool
	log     logr.Logger
	mux     *http.ServeMux
	limiter *limiter
}

// New validates opts and builds the service; it does not listen yet.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("bootstrap service needs a Client")
	case opts.SPIRE == nil && (opts.CA == nil || opts.Attestor == nil):
		return nil, errors.New("bootstrap service needs a CA and an Attestor, or a SPIRE Workload API source")
	case opts.Platforms == nil:
		return nil, errors.New("bootstrap service needs a CI platform Source")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), limiter: newLimiter(opts.Limits, time.Now)}
	if opts.SPIRE != nil {
		if err := s.useSPIRE(opts.SPIRE); err != nil {
			return nil, err
		}
	} else {
		s.td, s.bundle = opts.CA.TrustDomain(), opts.CA.Bundle()
		s.svid = &rotatingSVID{ca: opts.CA, id: identity.BootstrapServiceID(s.td), dns: opts.DNSNames, ips: opts.IPs, now: opts.Now}
		if _, err := s.svid.GetX509SVID(); err != nil {
			return nil, fmt.Errorf("issuing the service certificate: %w", err)
		}
		s.mux.HandleFunc("POST "+protocol.AttestPath, s.limiter.wrap(s.handleAttest))
	}
	if opts.TPM != nil && !s.spire {
		s.mux.HandleFunc("POST "+protocol.TPMAttestPath, s.limiter.wrap(s.handleTPMAttest))
		s.mux.HandleFunc("POST "+protocol.TPMActivatePath, s.limiter.wrap(s.handleTPMActivate))
	}
	s.mux.HandleFunc("GET "+protocol.RunnerConfigPath, s.handleRunnerConfig)
	s.mux.HandleFunc("DELETE "+protocol.RunnerPath, s.handleDeleteRunner)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	return s, nil
}

// useSPIRE takes the service's identity and trust bundle from SPIRE. The SVID SPIRE gives this
// service must be the one VMs accept: spiffe://<trust domain>/hyperfleet/bootstrap-service.
func (s *Server) useSPIRE(src SVIDSource) error {
	svid, err := src.GetX509SVID()
	if err != nil {
		return fmt.Errorf("the service's SVID from the SPIRE Workload API: %w", err)
	}
	td := svid.ID.TrustDomain()
	if want := identity.BootstrapServiceID(td); svid.ID != want {
		return fmt.Errorf("the SPIRE Workload API gives this service %s, but VMs accept only %s: register the bootstrap service under that SPIFFE ID", svid.ID, want)
	}
	s.td, s.svid, s.bundle, s.spire = td, src, src, true
	return nil
}

// TrustDomain is the trust domain of the SVIDs this service accepts and presents.
func (s *Server) TrustDomain() spiffeid.TrustDomain { return s.td }

// Handler is the HTTP handler; it expects TLS connections configured by TLSConfig.
func (s *Server) Handler() http.Handler { return limitBody(s.mux) }

// TLSConfig is go-spiffe's mTLS server configuration with one relaxation: a client certificate is
// optional at the handshake, because a VM calls /v1/attest before it has one. Any certificate that
// is presented is verified at the handshake exactly as MTLSServerConfig does (chain to the trust
// bundle, SVID rules, and an authorizer admitting only machine IDs of our trust domain), so an SVID
// from another CA never reaches a handler. Endpoints that need an SVID answer 401 without one.
func (s *Server) TLSConfig() *tls.Config {
	cfg := tlsconfig.MTLSServerConfig(s.svid, s.bundle, s.authorizeMachine)
	verify := cfg.VerifyPeerCertificate
	cfg.ClientAuth = tls.RequestClientCert
	cfg.VerifyPeerCertificate = func(raw [][]byte, chains [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return nil
		}
		return verify(raw, chains)
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// authorizeMachine admits SVIDs naming a machine in our trust domain; whether that machine is
// live is decided per request, with the API server at hand.
func (s *Server) authorizeMachine(id spiffeid.ID, _ [][]*x509.Certificate) error {
	_, _, err := identity.ParseMachineID(s.td, id)
	return err
}

// Serve serves TLS on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	// Every limit on a connection: slow or oversized requests cannot hold the service's memory or
	// its in-flight slots. WriteTimeout leaves room for requestTimeout (GitHub calls).
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: time.Minute, MaxHeaderBytes: maxHeaderBytes}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tls.NewListener(l, s.TLSConfig())) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return nil
	}
}

// Start listens on addr (e.g. 127.0.0.1:0) and serves in the background until ctx ends. It
// returns the service's https:// URL.
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	go func() {
		if err := s.Serve(ctx, l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "bootstrap service stopped")
		}
	}()
	return "https://" + l.Addr().String(), nil
}

// rotatingSVID is the service's own X509-SVID, reissued from the shared CA at half-life. Each
// replica holds its own key; agents only check that it chains to the CA and names the service.
type rotatingSVID struct {
	ca  *identity.CA
	id  spiffeid.ID
	dns []string
	ips []net.IP
	now func() time.Time

	mu      sync.Mutex
	current *x509svid.SVID
	renewAt time.Time
}

func (r *rotatingSVID) GetX509SVID() (*x509svid.SVID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == nil || !r.now().Before(r.renewAt) {
		svid, err := r.ca.IssueServerSVID(r.id, r.dns, r.ips, serverSVIDTTL)
		if err != nil {
			return nil, err
		}
		r.current, r.renewAt = svid, r.now().Add(serverSVIDTTL/2)
	}
	return r.current, nil
}
