package spire

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
)

// spireBins locates spire-server and spire-agent the way hack/spire.sh lays them out:
// SPIRE_BIN_DIR, else <TOOLS_CACHE or ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools>/spire.
func spireBins(t *testing.T) (server, agent string) {
	t.Helper()
	dir := os.Getenv("SPIRE_BIN_DIR")
	if dir == "" {
		cache := os.Getenv("TOOLS_CACHE")
		if cache == "" {
			base := os.Getenv("XDG_CACHE_HOME")
			if base == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					t.Fatalf("no home directory to find the tools cache in: %v", err)
				}
				base = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(base, "hyperfleet", "tools")
		}
		dir = filepath.Join(cache, "spire")
	}
	server, agent = filepath.Join(dir, "spire-server"), filepath.Join(dir, "spire-agent")
	for _, bin := range []string{server, agent} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("SPIRE binaries missing (%v): run hack/spire.sh (or make tools) first", err)
		}
	}
	return server, agent
}

// process is a spire-server or spire-agent started by a test; it is killed when the test ends.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error // set before done closes
}

func start(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not exit after kill", name)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log.String())
		}
	})
	return p
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// spireServer is a real spire-server on loopback with its admin API on a Unix socket.
type spireServer struct {
	td      spiffeid.TrustDomain
	port    int
	address string // unix:///.../api.sock
	proc    *process
}

func startSPIREServer(t *testing.T, bin, dir string, td spiffeid.TrustDomain) *spireServer {
	t.Helper()
	port := freePort(t)
	socket := filepath.Join(dir, "server.sock")
	conf := fmt.Sprintf(`server {
  bind_address = "127.0.0.1"
  bind_port = "%d"
  socket_path = %q
  trust_domain = %q
  data_dir = %q
  log_level = "DEBUG"
  default_x509_svid_ttl = "10m"
}
plugins {
  DataStore "sql" {
    plugin_data {
      database_type = "sqlite3"
      connection_string = %q
    }
  }
  KeyManager "memory" {
    plugin_data {}
  }
  NodeAttestor "join_token" {
    plugin_data {}
  }
}
`, port, socket, td.Name(), filepath.Join(dir, "server-data"), filepath.Join(dir, "datastore.sqlite3"))
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return &spireServer{td: td, port: port, address: "unix://" + socket,
		proc: start(t, "spire-server", bin, "run", "-config", path)}
}

// agentConfig writes the spire-agent config a VM gets from its bootstrap data, with its paths
// moved into dir (an agent keeps its SVID in its data directory, so each attempt needs its own).
// It returns the config path and the Workload API address.
func agentConfig(t *testing.T, dir string, s *spireServer, token string, bundlePEM []byte) (string, string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bundle, bundlePEM, 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "workload.sock")
	conf := strings.NewReplacer(
		bootstrap.SPIREAgentDataDir, filepath.Join(dir, "data"),
		bootstrap.SPIREWorkloadAPISocket, socket,
		bootstrap.SPIREAgentBundlePath, bundle,
		`log_level = "INFO"`, `log_level = "DEBUG"`,
	).Replace(bootstrap.SPIREAgentConfig(s.td.Name(), "127.0.0.1", strconv.Itoa(s.port), token))
	path := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, "unix://" + socket
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
