package pvesim

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// Config configures a Simulator. The zero value is usable: default inventory,
// no tokens and no users (so nothing can log in; StartForTest adds a token).
type Config struct {
	// Inventory is the initial world; nil means DefaultInventory().
	Inventory *Inventory
	// Tokens are the API tokens accepted in "Authorization: PVEAPIToken=ID=SECRET".
	Tokens []Token
	// Users maps "user@realm" to a password for POST /access/ticket.
	Users map[string]string
	// TaskDuration is how long clone/start/stop/delete/config tasks run (default 30ms).
	TaskDuration time.Duration
	// BootDelay is how long a started VM needs before its guest agent answers (default 50ms).
	BootDelay time.Duration
	// BootHook, when set, runs for every VM start with the VM's cloud-init data.
	BootHook BootHook
	// Guest, when set, boots every started VM as a real guest under QEMU (see QEMUGuest) instead
	// of running BootHook.
	Guest *QEMUGuest
	// Seed seeds the fault-injection RNG (and MAC/IP choices) for reproducible runs.
	Seed int64
	// AuthFailureDelay delays 401 answers; real PVE waits 3s, tests want 0.
	AuthFailureDelay time.Duration
	// TLSCertificate replaces the self-signed certificate when set.
	TLSCertificate *tls.Certificate
	// PlainHTTP serves http:// instead of https://, as a lab behind a TLS-less proxy would: for
	// tests of how clients treat credentials sent in clear text.
	PlainHTTP bool
	// Load is the load model (see LoadModel); the zero value is off: tasks take TaskDuration and
	// any number of requests are served at once.
	Load LoadModel
	// Logger receives request and task logs; nil discards them.
	Logger *slog.Logger
}

// Token is a PVE API token. ID is "user@realm!tokenid". Privileges nil means
// every privilege (like root@pam or a token without privilege separation);
// otherwise only the listed privileges (e.g. "VM.Audit") are granted on every path.
type Token struct {
	ID         string
	Secret     string
	Privileges []string
}

// Simulator is a running (or startable) simulated Proxmox VE cluster.
type Simulator struct {
	// pciMappings maps a PCI resource mapping's ID to the nodes that have a device for it.
	pciMappings map[string]map[string]bool
	cfg         Config
	log         *slog.Logger
	schema      *schema.Document
	routes      []*route

	mu       sync.Mutex
	cluster  string
	nodes    []*nodeState
	storages []*storageDef
	volumes  map[string]*volume // key: node + "/" + volid (shared storages use "" node)
	vms      map[int]*vmState
	pools    map[string]*poolState
	sdn      *sdnState
	fw       *firewallState
	repl     map[string]*replJob
	tasks    map[string]*task
	taskList []*task
	tickets  map[string]string // ticket -> user
	csrf     map[string]string // CSRF token -> user
	pidSeq   int
	ipSeq    int
	rng      *mrand.Rand
	faults   []*faultState
	faultSeq int
	requests map[string]int
	boots    map[int]*bootRun
	// guestProcs are agent/exec commands by VMID and PID; guestExecs records every one started.
	guestProcs map[int]map[int]*guestProcess
	guestExecs []GuestExec
	snapSeq    int
	// load is the load model's runtime; nil when the model is off.
	load *loadState
	// qemu is the QEMU backend's runtime; nil unless Config.Guest is set.
	qemu *qemuguest.Host

	tlsCert *tls.Certificate
	caPEM   []byte
	ln      net.Listener
	srv     *http.Server
	url     string
	base    string
	closing chan struct{}
	closed  bool
	wg      sync.WaitGroup
}

// New builds a simulator from cfg without listening yet.
func New(cfg Config) (*Simulator, error) {
	if cfg.TaskDuration <= 0 {
		cfg.TaskDuration = 30 * time.Millisecond
	}
	if cfg.BootDelay <= 0 {
		cfg.BootDelay = 50 * time.Millisecond
	}
	inv := cfg.Inventory
	if inv == nil {
		inv = DefaultInventory()
	}
	doc, err := schema.Load()
	if err != nil {
		return nil, err
	}
	s := &Simulator{
		cfg:      cfg,
		log:      cfg.Logger,
		schema:   doc,
		volumes:  map[string]*volume{},
		vms:      map[int]*vmState{},
		pools:    map[string]*poolState{},
		sdn:      newSDNState(),
		fw:       newFirewallState(),
		repl:     map[string]*replJob{},
		tasks:    map[string]*task{},
		tickets:  map[string]string{},
		csrf:     map[string]string{},
		requests: map[string]int{},
		boots:    map[int]*bootRun{},
		rng:      mrand.New(mrand.NewSource(cfg.Seed)),
		pidSeq:   100000,
		closing:  make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Load.Enabled {
		s.load = newLoadState(cfg.Load, cfg.Seed)
	}
	if cfg.Guest != nil {
		if s.qemu, err = qemuguest.New(*cfg.Guest); err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.Tokens {
		if err := validateTokenID(t.ID); err != nil {
			return nil, err
		}
	}
	if err := s.routeTable(); err != nil {
		return nil, err
	}
	if err := s.loadInventory(inv); err != nil {
		return nil, err
	}
	return s, nil
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves HTTPS.
func (s *Simulator) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pvesim: listen %s: %w", addr, err)
	}
	cert := s.cfg.TLSCertificate
	if cert == nil {
		// For the address it listens on too, so that a client elsewhere than on loopback (a pod
		// on a node's bridge) verifies it.
		c, caPEM, err := fakeserver.SelfSigned(ln.Addr(), "pvesim")
		if err != nil {
			_ = ln.Close()
			return err
		}
		cert, s.caPEM = &c, caPEM
	} else if len(cert.Certificate) > 0 {
		s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[len(cert.Certificate)-1]})
	}
	s.tlsCert = cert
	s.ln = ln
	s.base = "https://" + ln.Addr().String()
	if s.cfg.PlainHTTP {
		s.base = "http://" + ln.Addr().String()
	}
	s.url = s.base + "/api2/json"
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// Real pveproxy speaks HTTP/1.1 only; HTTP/2 would also make the
		// hand-written reason phrases impossible.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{*cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"},
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		serve := func() error { return s.srv.ServeTLS(ln, "", "") }
		if s.cfg.PlainHTTP {
			serve = func() error { return s.srv.Serve(ln) }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("pvesim server stopped", "err", err)
		}
	}()
	s.log.Info("pvesim listening", "url", s.url)
	return nil
}

// URL is the API base URL, e.g. "https://127.0.0.1:PORT/api2/json".
func (s *Simulator) URL() string { return s.url }

// AdminURL is the base of the admin endpoint, e.g. "https://127.0.0.1:PORT/_sim".
func (s *Simulator) AdminURL() string { return s.base + "/_sim" }

// CACertPEM is the PEM of the certificate clients should trust.
func (s *Simulator) CACertPEM() []byte { return append([]byte(nil), s.caPEM...) }

// Close stops the server, running tasks and boot hooks.
func (s *Simulator) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	for _, b := range s.boots {
		b.cancel()
	}
	s.mu.Unlock()
	var err error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err = s.srv.Shutdown(ctx); err != nil {
			err = s.srv.Close()
		}
	}
	s.wg.Wait()
	if s.qemu != nil {
		s.qemu.Close()
	}
	return err
}
