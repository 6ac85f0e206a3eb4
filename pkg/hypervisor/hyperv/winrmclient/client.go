package winrmclient

import (
	"context"
	"errors"
	"time"
)

// Auth schemes a Config may name.
const (
	AuthBasic = "basic"
	AuthNTLM  = "ntlm"
)

// Config describes one WinRM endpoint and how to authenticate to it.
type Config struct {
	// Endpoint is the WS-Management URL, e.g. https://host:5986/wsman.
	Endpoint string
	// Username and Password are the account's credentials.
	Username, Password string
	// Auth is AuthBasic or AuthNTLM (the default).
	Auth string
	// CABundle holds PEM certificates trusted for the host's HTTPS certificate; empty means the
	// system roots.
	CABundle []byte
	// InsecureSkipVerify disables certificate verification (lab only).
	InsecureSkipVerify bool
	// AllowInsecureHTTP permits an http:// endpoint: credentials and scripts then travel in clear.
	AllowInsecureHTTP bool
	// OperationTimeout bounds every WS-Management request on the transport.
	OperationTimeout time.Duration
}

// Result is the outcome of one PowerShell run.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Client runs PowerShell on one Windows host.
type Client struct {
	cfg Config
}

// New validates cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	return &Client{cfg: cfg}, errors.New("winrmclient: not implemented yet")
}

// RunPowerShell runs script with powershell.exe -EncodedCommand.
func (c *Client) RunPowerShell(ctx context.Context, script string) (Result, error) {
	return Result{}, errors.New("winrmclient: not implemented yet")
}

// Upload writes content to remotePath on the host, atomically, verified by SHA-256.
func (c *Client) Upload(ctx context.Context, remotePath string, content []byte) error {
	return errors.New("winrmclient: not implemented yet")
}
