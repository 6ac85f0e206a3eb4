package winrmclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-ntlmssp"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Auth schemes a Config may name.
const (
	AuthBasic = "basic"
	AuthNTLM  = "ntlm"
)

// DefaultOperationTimeout is WinRM's own default OperationTimeout.
const DefaultOperationTimeout = 60 * time.Second

// Config describes one WinRM endpoint and how to authenticate to it.
type Config struct {
	// Endpoint is the WS-Management URL, e.g. https://host:5986/wsman.
	Endpoint string
	// Username and Password are the account's credentials (DOMAIN\user for a domain account).
	Username, Password string
	// Auth is AuthNTLM (the default when empty) or AuthBasic.
	Auth string
	// CABundle holds PEM certificates trusted for the host's HTTPS certificate; empty means the
	// system roots.
	CABundle []byte
	// InsecureSkipVerify disables certificate verification (lab only).
	InsecureSkipVerify bool
	// AllowInsecureHTTP permits an http:// endpoint. masterzen/winrm at the version HyperFleet
	// pins cannot encrypt WinRM messages, so credentials and scripts then travel in clear.
	AllowInsecureHTTP bool
	// OperationTimeout bounds each WS-Management request: it is sent as the request's
	// OperationTimeout, and the HTTP exchange is abandoned a little after it, so a hung host
	// cannot hold a caller. 0 means DefaultOperationTimeout.
	OperationTimeout time.Duration
	// MaxShells bounds how many shells the client holds open on the host at once; runs beyond
	// it wait their turn. WinRM allows a user MaxShellsPerUser (30 by default) shells per host,
	// and refuses every further one until some close. 0 means DefaultMaxShells.
	MaxShells int
	// ShellIdleTimeout is the IdleTimeOut each shell asks the host for; 0 means the longer of two
	// minutes and twice OperationTimeout (see Client.ShellIdleTimeout).
	ShellIdleTimeout time.Duration
}

// DefaultMaxShells is half of WinRM's default MaxShellsPerUser (30), leaving the rest to shells
// a stopped manager left behind (until they idle out, see ShellIdleTimeout) and to people using
// the same account.
const DefaultMaxShells = 15

// Client runs PowerShell on one Windows host. It is safe for concurrent use; each run opens its
// own shell, and HTTP connections (NTLM authenticates a connection) are reused between runs.
type Client struct {
	cfg      Config
	endpoint *url.URL
	insecure bool
	newHTTP  func() *http.Client
	idle     chan *http.Client
	// shells holds a token per open shell, at most MaxShells.
	shells chan struct{}
}

// New validates cfg and builds a Client. It does not contact the host.
func New(cfg Config) (*Client, error) {
	const op = "configure WinRM client"
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "endpoint %q is not a URL like https://host:5986/wsman", cfg.Endpoint)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !cfg.AllowInsecureHTTP {
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"endpoint %s is plain HTTP: WinRM message encryption is not available, so HyperFleet requires HTTPS (port 5986) unless allowInsecureHTTP is set", redact(u))
		}
	default:
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "endpoint scheme %q: want https (or http with allowInsecureHTTP)", u.Scheme)
	}
	if u.User != nil {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "endpoint must not carry credentials; set the username and password instead")
	}
	if u.Path == "" {
		u.Path = "/wsman"
	}
	switch cfg.Auth = strings.ToLower(cfg.Auth); cfg.Auth {
	case "":
		cfg.Auth = AuthNTLM
	case AuthNTLM, AuthBasic:
	default:
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "auth %q: want %q or %q", cfg.Auth, AuthNTLM, AuthBasic)
	}
	if cfg.Username == "" || cfg.Password == "" {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "username and password are required")
	}
	if cfg.OperationTimeout == 0 {
		cfg.OperationTimeout = DefaultOperationTimeout
	}
	if cfg.MaxShells == 0 {
		cfg.MaxShells = DefaultMaxShells
	}
	if cfg.MaxShells < 1 {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "max shells %d: want at least 1", cfg.MaxShells)
	}
	if cfg.OperationTimeout < time.Second {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "operation timeout %s: WinRM needs at least 1s", cfg.OperationTimeout)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // lab opt-in, reported as InsecureTransport.
	if len(cfg.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CABundle) {
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	base := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 15 * time.Second,
		// NTLM authenticates a TCP connection, and go-ntlmssp sends its NEGOTIATE and AUTHENTICATE
		// messages as separate requests: with one connection per HTTP client they cannot land on
		// different connections.
		MaxConnsPerHost: 1,
		IdleConnTimeout: 90 * time.Second,
	}
	c := &Client{
		cfg:      cfg,
		endpoint: u,
		insecure: u.Scheme == "http" || cfg.InsecureSkipVerify,
		idle:     make(chan *http.Client, maxIdleConnections),
		shells:   make(chan struct{}, cfg.MaxShells),
	}
	c.newHTTP = func() *http.Client {
		var rt http.RoundTripper = base.Clone()
		if cfg.Auth == AuthNTLM {
			// go-ntlmssp turns the request's Basic credentials into an NTLM handshake, but falls
			// back to sending them as Basic when the host offers nothing else; refuseBasic stops
			// that downgrade.
			rt = ntlmssp.Negotiator{RoundTripper: refuseBasic{rt}}
		}
		return &http.Client{Transport: rt,
			// A redirect would carry the credentials elsewhere; WinRM never redirects.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c, nil
}

// maxIdleConnections is how many authenticated connections a Client keeps between runs.
const maxIdleConnections = 4

// acquire returns an HTTP client (one connection, perhaps already authenticated) for one run,
// which sends its requests one after another.
func (c *Client) acquire() *http.Client {
	select {
	case h := <-c.idle:
		return h
	default:
		return c.newHTTP()
	}
}

// release keeps h for a later run, or closes its connection when enough are kept.
func (c *Client) release(h *http.Client) {
	select {
	case c.idle <- h:
	default:
		h.CloseIdleConnections()
	}
}

// Insecure reports whether the client sends in clear (http://) or does not verify the host's
// certificate: the HypervisorCluster's InsecureTransport condition.
func (c *Client) Insecure() bool { return c.insecure }

// Endpoint returns the WS-Management URL the client talks to.
func (c *Client) Endpoint() string { return c.endpoint.String() }

// refuseBasic is the transport under the NTLM negotiator: it never sends a password as Basic.
type refuseBasic struct{ next http.RoundTripper }

// errBasicRefused is returned when an NTLM client would have sent Basic credentials.
var errBasicRefused = errors.New("the host offered only Basic authentication, but this client is configured for NTLM; refusing to send the password as Basic")

func (r refuseBasic) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasPrefix(req.Header.Get("Authorization"), "Basic ") {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errBasicRefused
	}
	return r.next.RoundTrip(req)
}

func redact(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.Path
}

// hostPort splits the endpoint for masterzen/winrm's Endpoint, which only builds the wsa:To header.
func (c *Client) hostPort() (string, int) {
	port, err := strconv.Atoi(c.endpoint.Port())
	if err != nil {
		port = 5986
		if c.endpoint.Scheme == "http" {
			port = 5985
		}
	}
	return c.endpoint.Hostname(), port
}
