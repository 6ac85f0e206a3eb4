package hvsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/masterzen/winrm"
)

const (
	testUser     = "hyperfleet"
	testPassword = "S3cret!pass"
)

// echoExecutor is the trivial executor of these tests: `echo TEXT` prints, `exit N` exits,
// `sleep DURATION` waits (ending early when the command is terminated), `big N` prints N bytes;
// PowerShell encoded commands are decoded and run the same way.
func echoExecutor(started chan<- string) Executor {
	return ExecutorFunc(func(ctx context.Context, user, line string, stdin []byte) ([]byte, []byte, int) {
		if script, ok, err := DecodePowerShell(line); ok {
			if err != nil {
				return nil, []byte(err.Error()), 1
			}
			line = strings.TrimPrefix(script, "$ProgressPreference = 'SilentlyContinue';")
		}
		if started != nil {
			started <- line
		}
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "echo":
			return []byte(arg + "\r\n"), nil, 0
		case "whoami":
			return []byte(user + "\r\n"), nil, 0
		case "stdin":
			return stdin, nil, 0
		case "exit":
			var code int
			for _, r := range arg {
				code = code*10 + int(r-'0')
			}
			return nil, []byte("exiting\r\n"), code
		case "sleep":
			d, _ := time.ParseDuration(arg)
			select {
			case <-time.After(d):
				return []byte("slept\r\n"), nil, 0
			case <-ctx.Done():
				return nil, []byte("terminated"), 1
			}
		case "big":
			var n int
			for _, r := range arg {
				n = n*10 + int(r-'0')
			}
			return []byte(strings.Repeat("x", n)), nil, 0
		}
		return nil, []byte("unknown command " + verb), 9009
	})
}

func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Users == nil {
		opts.Users = map[string]string{testUser: testPassword}
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mzClient is masterzen/winrm's own client (its Basic transport, or its NTLM one) for the server.
func mzClient(t testing.TB, s *Server, user, password string, ntlm bool, timeout string) *winrm.Client {
	t.Helper()
	host, port := splitURL(t, s.URL())
	ep := winrm.NewEndpoint(host, port, strings.HasPrefix(s.URL(), "https"), false, s.CAPEM(), nil, nil, 10*time.Second)
	params := winrm.NewParameters(timeout, "en-US", 153600)
	if ntlm {
		params.TransportDecorator = func() winrm.Transporter { return &winrm.ClientNTLM{} }
	}
	c, err := winrm.NewClientWithParameters(ep, user, password, params)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func splitURL(t testing.TB, u string) (string, int) {
	t.Helper()
	hostport := strings.TrimSuffix(strings.SplitN(u, "://", 2)[1], "/wsman")
	i := strings.LastIndex(hostport, ":")
	port := 0
	for _, r := range hostport[i+1:] {
		port = port*10 + int(r-'0')
	}
	return hostport[:i], port
}
