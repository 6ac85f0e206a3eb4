package hvsim

import (
	"errors"
	"time"
)

// Options configure a Server.
type Options struct {
	// Addr is the loopback listen address; "" picks 127.0.0.1:0.
	Addr string
	// Users maps user names to passwords accepted by Basic and NTLM.
	Users map[string]string
	// TLS serves HTTPS with a generated CA (see Server.CAPEM); false serves plain HTTP.
	TLS bool
	// Executor runs commands; nil refuses every command with exit code 1.
	Executor Executor
	// MaxShellsPerUser is the per-user shell quota (WinRM's MaxShellsPerUser, default 30).
	MaxShellsPerUser int
	// MaxEnvelopeSize etc. default to WinRM's values.
	MaxCommandLine int
	// ReceiveTimeout is how long a Receive waits for a running command before the
	// OperationTimeout fault; 0 uses the request's OperationTimeout header.
	ReceiveTimeout time.Duration
}

// Server is a running WS-Management simulator.
type Server struct {
	opts Options
}

// Start starts a Server listening on loopback.
func Start(opts Options) (*Server, error) {
	return nil, errors.New("hvsim: not implemented yet")
}

// URL returns the server's /wsman endpoint.
func (s *Server) URL() string { return "" }

// CAPEM returns the PEM of the CA that signed the server's certificate (nil without TLS).
func (s *Server) CAPEM() []byte { return nil }

// Close stops the server.
func (s *Server) Close() error { return nil }
