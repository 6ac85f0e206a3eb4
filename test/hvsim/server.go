package hvsim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of a Windows Server WinRM service (winrm get winrm/config).
const (
	DefaultMaxShellsPerUser = 30
	// DefaultMaxEnvelopeSize is MaxEnvelopeSizekb 500, the largest request body accepted.
	DefaultMaxEnvelopeSize = 500 * 1024
	// MaxCommandLine is cmd.exe's limit on a command line; WinRM runs commands through cmd.exe
	// (WINRS_SKIP_CMD_SHELL=FALSE).
	MaxCommandLine          = 8191
	defaultOperationTimeout = 60 * time.Second
	// DefaultShellIdleTimeout is winrm/config/winrs IdleTimeout (7200000 ms).
	DefaultShellIdleTimeout = 2 * time.Hour
)

// Options configure a Server.
type Options struct {
	// Addr is the loopback listen address; "" picks 127.0.0.1 and a free port.
	Addr string
	// Users maps user names to passwords accepted by Basic and NTLM.
	Users map[string]string
	// TLS serves HTTPS with a certificate signed by a CA generated at start (see CAPEM), unless
	// TLSCertificate is given; false serves plain HTTP (a lab's port 5985).
	TLS bool
	// TLSCertificate, when set, is served instead of the generated one.
	TLSCertificate *tls.Certificate
	// DisableBasic and DisableNTLM turn an authentication scheme off, as
	// winrm/config/service/auth does.
	DisableBasic, DisableNTLM bool
	// Executor runs commands; nil answers every command as cmd.exe does for an unknown program.
	Executor Executor
	// MaxShellsPerUser is the per-user shell quota; 0 means DefaultMaxShellsPerUser.
	MaxShellsPerUser int
	// ShellIdleTimeout closes a shell that saw no request for this long, as WinRM's IdleTimeout
	// does; 0 means DefaultShellIdleTimeout.
	ShellIdleTimeout time.Duration
	// MaxEnvelopeSize bounds request bodies; 0 means DefaultMaxEnvelopeSize.
	MaxEnvelopeSize int
	// ReceiveTimeout, when set and shorter, replaces the request's OperationTimeout as the time a
	// Receive waits for a running command before the OperationTimeout fault.
	ReceiveTimeout time.Duration
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
}

// Server is a running WS-Management simulator.
type Server struct {
	opts    Options
	machine string
	url     string
	caPEM   []byte
	ln      net.Listener
	http    *http.Server
	log     *slog.Logger

	ctx    context.Context // ends running commands when the server closes
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	shells map[string]*shell
	faults []*Fault
	stats  Stats
}

// Start starts a Server listening on loopback.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if err := requireLoopback(opts.Addr); err != nil {
		return nil, err
	}
	if opts.MaxShellsPerUser <= 0 {
		opts.MaxShellsPerUser = DefaultMaxShellsPerUser
	}
	if opts.ShellIdleTimeout <= 0 {
		opts.ShellIdleTimeout = DefaultShellIdleTimeout
	}
	if opts.MaxEnvelopeSize <= 0 {
		opts.MaxEnvelopeSize = DefaultMaxEnvelopeSize
	}
	if opts.Executor == nil {
		opts.Executor = refusingExecutor{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, machine: "hvsim", ln: ln, log: log, ctx: ctx, cancel: cancel,
		shells: map[string]*shell{}, stats: Stats{Calls: map[string]int{}, Faults: map[uint32]int{}}}
	s.http = &http.Server{Handler: s, ConnContext: withConnState, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		// HTTP/1.1 only, as HTTP.sys serves WinRM: NTLM authenticates a connection.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	scheme := "http"
	if opts.TLS || opts.TLSCertificate != nil {
		scheme = "https"
		cert := opts.TLSCertificate
		if cert == nil {
			generated, caPEM, err := generateCertificate(ln.Addr())
			if err != nil {
				_ = ln.Close()
				cancel()
				return nil, err
			}
			cert, s.caPEM = &generated, caPEM
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
		s.ln = ln
	}
	s.url = fmt.Sprintf("%s://%s/wsman", scheme, ln.Addr().String())
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: the simulator serves loopback only", addr)
	}
	return nil
}

// URL returns the server's /wsman endpoint.
func (s *Server) URL() string { return s.url }

// CAPEM returns the PEM of the CA that signed the server's certificate (nil without TLS or with
// Options.TLSCertificate).
func (s *Server) CAPEM() []byte { return s.caPEM }

// Close stops the server, ending running commands and dropping connections.
func (s *Server) Close() error {
	s.cancel()
	// Close, not Shutdown: a client connection that finished its TLS handshake but sent no request
	// yet would hold Shutdown for five seconds, and long-polling Receives end with s.ctx anyway.
	err := s.http.Close()
	s.wg.Wait()
	return err
}

// ServeHTTP answers one WS-Management request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/wsman" {
		s.httpError(w, http.StatusNotFound, "not found")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.httpError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxEnvelopeSize)))
	if err != nil {
		s.httpError(w, http.StatusRequestEntityTooLarge, "request envelope larger than MaxEnvelopeSizekb")
		return
	}
	user := s.authenticate(w, r)
	if user == "" {
		return
	}
	ct := r.Header.Get("Content-Type")
	switch {
	case len(body) == 0:
		// The empty POST a client sends to set up its security context before it encrypts
		// (pywinrm's setup_encryption): accepted with an empty 200, as Windows answers it.
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	case isEncrypted(ct):
		cs, _ := r.Context().Value(connKey{}).(*connState)
		var sess *ntlmSession
		if cs != nil {
			cs.mu.Lock()
			sess = cs.session
			cs.mu.Unlock()
		}
		if sess == nil {
			s.httpError(w, http.StatusBadRequest, "no NTLM session that negotiated sealing on this connection")
			return
		}
		plain, err := openEncrypted(sess, body)
		if err != nil {
			s.httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		body, ct = plain, "application/soap+xml;charset=UTF-8"
		sw := newSealingWriter(w, sess)
		defer sw.finish()
		w = sw
	}
	if !strings.HasPrefix(strings.ToLower(ct), "application/soap+xml") {
		s.httpError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/soap+xml")
		return
	}
	env, fault := parseEnvelope(body)
	if fault != nil {
		s.writeFault(w, env, *fault)
		return
	}
	action, known := actionNames[env.Header.Action]
	if !known {
		s.writeFault(w, env, actionNotSupported(env.Header.Action))
		return
	}
	s.mu.Lock()
	s.stats.Calls[action]++
	s.stats.BytesIn += int64(len(body))
	s.mu.Unlock()
	s.log.Debug("wsman", "action", action, "user", user, "shell", env.selector("ShellId"))

	if f := s.takeFault(action); f != nil {
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return
			case <-s.ctx.Done():
				return
			}
		}
		if f.Code != 0 {
			s.writeFault(w, env, faultFor(f.Code, fmt.Sprint(s.opts.MaxShellsPerUser)))
			return
		}
		if f.HTTPStatus != 0 {
			s.httpError(w, f.HTTPStatus, http.StatusText(f.HTTPStatus))
			return
		}
	}
	if env.Header.ResourceURI != cmdResource {
		s.writeFault(w, env, destinationUnreachable(env.Header.ResourceURI))
		return
	}
	switch action {
	case ActionCreate:
		s.create(w, r, env, user)
	case ActionCommand:
		s.command(w, env, user)
	case ActionSend:
		s.send(w, env, user)
	case ActionReceive:
		s.receive(w, r, env, user)
	case ActionSignal:
		s.signal(w, env, user)
	case ActionDelete:
		s.delete(w, env, user)
	}
}

// httpError answers without a SOAP body, for what WinRM refuses before reading the envelope (the
// HTTP method, URL, size and media type) and for injected statuses; masterzen/winrm reports it as
// an invalid content type with the status code.
func (s *Server) httpError(w http.ResponseWriter, status int, msg string) {
	s.mu.Lock()
	s.stats.HTTPErrors++
	s.mu.Unlock()
	http.Error(w, msg, status)
}

// generateCertificate makes a CA and a one-day server certificate it signs for the listener's
// address, 127.0.0.1, ::1 and localhost.
func generateCertificate(addr net.Addr) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "hvsim test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, tcp.IP)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return tls.Certificate{}, nil, errors.Join(errors.New("server key pair"), err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
