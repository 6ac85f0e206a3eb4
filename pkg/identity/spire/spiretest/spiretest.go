package spiretest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
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
	server, agent, err := spirelocal.Bins(dir)
	if err != nil {
		t.Fatal(err)
	}
	return server, agent
}

// Process is a spire-server or spire-agent started by a test; it is killed when the test ends and
// its log shown if the test failed.
type Process struct {
	*spirelocal.Process
	log *syncBuffer
}

// Log is what the process wrote so far.
func (p *Process) Log() string { return p.log.String() }

// Stop kills the process before the test ends.
func (p *Process) Stop() { _ = p.Process.Stop() }

// Start runs bin with args until the test ends.
func Start(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	log := &syncBuffer{}
	p, err := spirelocal.Start(name, log, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return watch(t, p, log)
}

func watch(t testing.TB, p *spirelocal.Process, log *syncBuffer) *Process {
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", p.Name, log.String())
		}
	})
	return &Process{Process: p, log: log}
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

// Server is a real spire-server for a test.
type Server struct {
	*spirelocal.Server
	Proc *Process
}

// StartServer runs a spire-server for td with its files in dir, ready when it returns.
func StartServer(t testing.TB, bin, dir string, td spiffeid.TrustDomain) *Server {
	t.Helper()
	log := &syncBuffer{}
	s, err := spirelocal.StartServer(ctx(t, 30*time.Second), bin, dir, td, log)
	if err != nil {
		t.Logf("spire-server log:\n%s", log.String())
		t.Fatal(err)
	}
	proc := watch(t, s.Proc, log)
	t.Cleanup(func() { _ = s.Close() })
	return &Server{Server: s, Proc: proc}
}

// BundlePEM is the server's X.509 authorities.
func (s *Server) BundlePEM() ([]byte, error) { return s.Server.BundlePEM(context.Background()) }

// JoinToken creates a join token valid for ttl.
func (s *Server) JoinToken(t testing.TB, ttl time.Duration) string {
	t.Helper()
	token, err := s.Server.JoinToken(ctx(t, 5*time.Second), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Register gives workloads running as this process's user, on the agent attested with token, the
// SPIFFE ID id.
func (s *Server) Register(t testing.TB, id spiffeid.ID, token string) {
	t.Helper()
	if err := s.Server.Register(ctx(t, 5*time.Second), id, token, UIDSelector()); err != nil {
		t.Fatal(err)
	}
}

// Entries lists the registration entries for id.
func (s *Server) Entries(t testing.TB, id spiffeid.ID) []*types.Entry {
	t.Helper()
	entries, err := s.Server.Entries(ctx(t, 5*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// AgentIDs lists the SPIFFE IDs of the attested agents.
func (s *Server) AgentIDs(t testing.TB) []string {
	t.Helper()
	ids, err := s.Server.AgentIDs(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// AgentPath is the path of the SPIFFE ID an agent attested with token holds.
func AgentPath(token string) string { return spirelocal.AgentPath(token) }

// UIDSelector selects workloads running as this process's user: the test process is the workload.
func UIDSelector() *types.Selector { return spirelocal.UIDSelector() }

// UIDSelectorString is UIDSelector as a provisioner's "type:value" selector.
func UIDSelectorString() string { return spirelocal.UIDSelectorString() }

// AgentConfig writes the spire-agent config a VM gets from its bootstrap data for token, with its
// paths moved into dir. It returns the config path and the Workload API address.
func AgentConfig(t testing.TB, dir string, s *Server, token string, bundlePEM []byte) (string, string) {
	t.Helper()
	paths := spirelocal.AgentPathsIn(dir)
	if err := paths.WriteAgentFiles(agentConf(s, token), bundlePEM); err != nil {
		t.Fatal(err)
	}
	return paths.Config, paths.WorkloadAPI()
}

// StartAgent runs a spire-agent attesting to s with token, its files in dir, until the test ends,
// and returns its Workload API address.
func StartAgent(t testing.TB, name, bin, dir string, s *Server, token string) (*Process, string) {
	t.Helper()
	log := &syncBuffer{}
	p, api, err := s.Server.StartAgent(ctx(t, 5*time.Second), name, bin, dir, token, log)
	if err != nil {
		t.Fatal(err)
	}
	return watch(t, p, log), api
}

func agentConf(s *Server, token string) string { return spirelocal.AgentConfig(s.Server, token) }

func ctx(t testing.TB, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}
