package spiretest

import (
	"bytes"
	"context"
	"encoding/pem"
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
	agentv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/agent/v1"
	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// Bins locates spire-server and spire-agent the way hack/spire.sh lays them out: SPIRE_BIN_DIR,
// else the spire directory of the tools cache (testenv.ToolsCacheDir).
func Bins(t testing.TB) (server, agent string) {
	t.Helper()
	dir := os.Getenv("SPIRE_BIN_DIR")
	if dir == "" {
		cache, err := testenv.ToolsCacheDir()
		if err != nil {
			t.Fatalf("finding the tools cache: %v", err)
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

// Process is a spire-server or spire-agent started by a test; it is killed when the test ends.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

// Start runs bin with args until the test ends; its output is logged if the test fails.
func Start(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{name: name, cmd: exec.Command(bin, args...), log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
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

// Stop kills the process and waits for it to exit.
func (p *Process) Stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Log is what the process wrote so far.
func (p *Process) Log() string { return p.log.String() }

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

// Server is a real spire-server on loopback with its admin API on a Unix socket.
type Server struct {
	TrustDomain spiffeid.TrustDomain
	// Port is where agents attest (127.0.0.1).
	Port int
	// Address is the admin API, unix:///.../server.sock.
	Address string
	Proc    *Process
	conn    *grpc.ClientConn
}

// StartServer runs a spire-server for td with its files in dir and waits until it serves its
// trust bundle.
func StartServer(t testing.TB, bin, dir string, td spiffeid.TrustDomain) *Server {
	t.Helper()
	port := FreePort(t)
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
	s := &Server{TrustDomain: td, Port: port, Address: "unix://" + socket,
		Proc: Start(t, "spire-server", bin, "run", "-config", path)}
	conn, err := grpc.NewClient(s.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.conn = conn
	t.Cleanup(func() { _ = conn.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.BundlePEM(); err == nil {
			return s
		} else if time.Now().After(deadline) {
			t.Fatalf("spire-server did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// BundlePEM is the server's X.509 authorities.
func (s *Server) BundlePEM() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := bundlev1.NewBundleClient(s.conn).GetBundle(ctx, &bundlev1.GetBundleRequest{})
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, a := range b.X509Authorities {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Asn1})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no X.509 authority yet")
	}
	return out, nil
}

// JoinToken creates a join token valid for ttl, as `spire-server token generate` does.
func (s *Server) JoinToken(t testing.TB, ttl time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tok, err := agentv1.NewAgentClient(s.conn).CreateJoinToken(ctx, &agentv1.CreateJoinTokenRequest{Ttl: int32(ttl.Seconds())})
	if err != nil {
		t.Fatalf("creating join token: %v", err)
	}
	return tok.Value
}

// AgentPath is the path of the SPIFFE ID an agent attested with token holds.
func AgentPath(token string) string { return "/spire/agent/join_token/" + token }

// Register creates a registration entry giving workloads running as this process's uid, on the
// agent attested with token, the SPIFFE ID id, as `spire-server entry create` does.
func (s *Server) Register(t testing.TB, id spiffeid.ID, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := entryv1.NewEntryClient(s.conn).BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{{
		SpiffeId:  &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()},
		ParentId:  &types.SPIFFEID{TrustDomain: s.TrustDomain.Name(), Path: AgentPath(token)},
		Selectors: []*types.Selector{UIDSelector()},
	}}})
	if err != nil {
		t.Fatalf("creating entry for %s: %v", id, err)
	}
	if st := resp.Results[0].Status; codes.Code(st.Code) != codes.OK {
		t.Fatalf("creating entry for %s: %s", id, st.Message)
	}
}

// Entries lists the registration entries for id.
func (s *Server) Entries(t testing.TB, id spiffeid.ID) []*types.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := entryv1.NewEntryClient(s.conn).ListEntries(ctx, &entryv1.ListEntriesRequest{
		Filter: &entryv1.ListEntriesRequest_Filter{BySpiffeId: &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()}},
	})
	if err != nil {
		t.Fatalf("listing entries: %v", err)
	}
	return resp.Entries
}

// AgentIDs lists the SPIFFE IDs of the attested agents.
func (s *Server) AgentIDs(t testing.TB) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := agentv1.NewAgentClient(s.conn).ListAgents(ctx, &agentv1.ListAgentsRequest{})
	if err != nil {
		t.Fatalf("listing agents: %v", err)
	}
	var ids []string
	for _, a := range resp.Agents {
		ids = append(ids, "spiffe://"+a.Id.TrustDomain+a.Id.Path)
	}
	return ids
}

// UIDSelector selects workloads running as this process's user: the test process is the workload.
func UIDSelector() *types.Selector {
	return &types.Selector{Type: "unix", Value: fmt.Sprintf("uid:%d", os.Getuid())}
}

// UIDSelectorString is UIDSelector as a provisioner's "type:value" selector.
func UIDSelectorString() string { return fmt.Sprintf("unix:uid:%d", os.Getuid()) }

// AgentConfig writes the spire-agent config a VM gets from its bootstrap data, with its paths
// moved into dir (an agent keeps its SVID in its data directory, so each agent needs its own).
// It returns the config path and the Workload API address (unix:///...).
func AgentConfig(t testing.TB, dir string, s *Server, token string, bundlePEM []byte) (string, string) {
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
	).Replace(bootstrap.SPIREAgentConfig(s.TrustDomain.Name(), "127.0.0.1", strconv.Itoa(s.Port), token))
	path := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, "unix://" + socket
}

// StartAgent runs a spire-agent attesting to s with token, its files in dir, and returns its
// Workload API address.
func StartAgent(t testing.TB, name, bin, dir string, s *Server, token string) (*Process, string) {
	t.Helper()
	bundle, err := s.BundlePEM()
	if err != nil {
		t.Fatal(err)
	}
	conf, workloadAPI := AgentConfig(t, dir, s, token, bundle)
	return Start(t, name, bin, "run", "-config", conf), workloadAPI
}

// FreePort is a TCP port on loopback nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
