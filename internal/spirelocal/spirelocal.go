package spirelocal

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
)

// Bins are the paths of spire-server and spire-agent in dir, checked to exist.
func Bins(dir string) (server, agent string, err error) {
	server, agent = filepath.Join(dir, "spire-server"), filepath.Join(dir, "spire-agent")
	for _, bin := range []string{server, agent} {
		if _, err := os.Stat(bin); err != nil {
			return "", "", fmt.Errorf("SPIRE binaries missing (%v): run hack/spire.sh (or make tools) first", err)
		}
	}
	return server, agent, nil
}

// Process is a running spire-server or spire-agent. It is killed if the process that started it
// dies (Linux).
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs bin with args, its output to out.
func Start(name string, out io.Writer, bin string, args ...string) (*Process, error) {
	p := &Process{Name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// Stop kills the process and waits for it to exit, at most 10 seconds.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not exit after SIGKILL", p.Name)
	}
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Server is a spire-server on loopback with its admin API on a Unix socket.
type Server struct {
	TrustDomain spiffeid.TrustDomain
	// Port is where agents attest (127.0.0.1).
	Port int
	// Address is the admin API, unix:///.../server.sock.
	Address string
	Proc    *Process
	conn    *grpc.ClientConn
}

// StartServer runs a spire-server for td with its files in dir and waits, bounded by ctx, until it
// serves its trust bundle. Its log goes to out.
func StartServer(ctx context.Context, bin, dir string, td spiffeid.TrustDomain, out io.Writer) (_ *Server, err error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	s := &Server{TrustDomain: td, Port: port, Address: "unix://" + socket}
	if s.Proc, err = Start("spire-server", out, bin, "run", "-config", path); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if s.conn, err = grpc.NewClient(s.Address, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	for {
		_, err := s.BundlePEM(ctx)
		if err == nil {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("spire-server did not come up: %w", err)
		case <-s.Proc.Exited():
			return nil, errors.New("spire-server exited at start; see its log")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops the server and closes the admin connection.
func (s *Server) Close() error {
	var errs []error
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	return errors.Join(append(errs, s.Proc.Stop())...)
}

// BundlePEM is the server's X.509 authorities.
func (s *Server) BundlePEM(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
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
		return nil, errors.New("no X.509 authority yet")
	}
	return out, nil
}

// JoinToken creates a join token valid for ttl, as `spire-server token generate` does.
func (s *Server) JoinToken(ctx context.Context, ttl time.Duration) (string, error) {
	tok, err := agentv1.NewAgentClient(s.conn).CreateJoinToken(ctx, &agentv1.CreateJoinTokenRequest{Ttl: int32(ttl.Seconds())})
	if err != nil {
		return "", fmt.Errorf("creating join token: %w", err)
	}
	return tok.Value, nil
}

// AgentPath is the path of the SPIFFE ID an agent attested with token holds.
func AgentPath(token string) string { return "/spire/agent/join_token/" + token }

// Register creates a registration entry giving workloads that match selectors, on the agent
// attested with token, the SPIFFE ID id, as `spire-server entry create` does.
func (s *Server) Register(ctx context.Context, id spiffeid.ID, token string, selectors ...*types.Selector) error {
	resp, err := entryv1.NewEntryClient(s.conn).BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{{
		SpiffeId:  &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()},
		ParentId:  &types.SPIFFEID{TrustDomain: s.TrustDomain.Name(), Path: AgentPath(token)},
		Selectors: selectors,
	}}})
	if err != nil {
		return fmt.Errorf("creating entry for %s: %w", id, err)
	}
	if st := resp.Results[0].Status; codes.Code(st.Code) != codes.OK {
		return fmt.Errorf("creating entry for %s: %s", id, st.Message)
	}
	return nil
}

// Entries lists the registration entries for id.
func (s *Server) Entries(ctx context.Context, id spiffeid.ID) ([]*types.Entry, error) {
	resp, err := entryv1.NewEntryClient(s.conn).ListEntries(ctx, &entryv1.ListEntriesRequest{
		Filter: &entryv1.ListEntriesRequest_Filter{BySpiffeId: &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()}},
	})
	if err != nil {
		return nil, fmt.Errorf("listing entries: %w", err)
	}
	return resp.Entries, nil
}

// AllEntries lists every registration entry on the server.
func (s *Server) AllEntries(ctx context.Context) ([]*types.Entry, error) {
	resp, err := entryv1.NewEntryClient(s.conn).ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing entries: %w", err)
	}
	return resp.Entries, nil
}

// AgentIDs lists the SPIFFE IDs of the attested agents.
func (s *Server) AgentIDs(ctx context.Context) ([]string, error) {
	resp, err := agentv1.NewAgentClient(s.conn).ListAgents(ctx, &agentv1.ListAgentsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing agents: %w", err)
	}
	var ids []string
	for _, a := range resp.Agents {
		ids = append(ids, "spiffe://"+a.Id.TrustDomain+a.Id.Path)
	}
	return ids, nil
}

// UIDSelector selects workloads running as this process's user.
func UIDSelector() *types.Selector {
	return &types.Selector{Type: "unix", Value: fmt.Sprintf("uid:%d", os.Getuid())}
}

// UIDSelectorString is UIDSelector as a provisioner's "type:value" selector.
func UIDSelectorString() string { return fmt.Sprintf("unix:uid:%d", os.Getuid()) }

// AgentPaths are where an agent's files live when it runs in a directory of its own.
type AgentPaths struct {
	Config, Bundle, DataDir, Socket string
}

// AgentPathsIn moves an agent's files into dir (each agent keeps its SVID in its data directory,
// so each needs its own). Unix sockets are limited to about 100 bytes of path.
func AgentPathsIn(dir string) AgentPaths {
	return AgentPaths{Config: filepath.Join(dir, "agent.conf"), Bundle: filepath.Join(dir, "bundle.pem"),
		DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "workload.sock")}
}

// WorkloadAPI is the agent's Workload API address.
func (p AgentPaths) WorkloadAPI() string { return "unix://" + p.Socket }

// Relocate rewrites a spire-agent configuration as a VM's bootstrap data writes it
// (bootstrap.SPIREAgentConfig) to use the paths in p.
func (p AgentPaths) Relocate(conf string) string {
	return strings.NewReplacer(
		bootstrap.SPIREAgentDataDir, p.DataDir,
		bootstrap.SPIREWorkloadAPISocket, p.Socket,
		bootstrap.SPIREAgentBundlePath, p.Bundle,
	).Replace(conf)
}

// WriteAgentFiles writes the agent configuration conf (relocated to p) and the trust bundle.
func (p AgentPaths) WriteAgentFiles(conf string, bundlePEM []byte) error {
	if err := os.MkdirAll(filepath.Dir(p.Config), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(p.Bundle, bundlePEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.Config, []byte(p.Relocate(conf)), 0o600)
}

// AgentConfig is the spire-agent configuration a VM's bootstrap data holds for token and s, with
// debug logging.
func AgentConfig(s *Server, token string) string {
	return strings.Replace(bootstrap.SPIREAgentConfig(s.TrustDomain.Name(), "127.0.0.1", strconv.Itoa(s.Port), token),
		`log_level = "INFO"`, `log_level = "DEBUG"`, 1)
}

// StartAgent runs a spire-agent in dir that attests to s with token, configured as a VM's
// bootstrap data configures it, and returns it with its Workload API address.
func (s *Server) StartAgent(ctx context.Context, name, bin, dir, token string, out io.Writer) (*Process, string, error) {
	bundle, err := s.BundlePEM(ctx)
	if err != nil {
		return nil, "", err
	}
	paths := AgentPathsIn(dir)
	if err := paths.WriteAgentFiles(AgentConfig(s, token), bundle); err != nil {
		return nil, "", err
	}
	p, err := Start(name, out, bin, "run", "-config", paths.Config)
	if err != nil {
		return nil, "", err
	}
	return p, paths.WorkloadAPI(), nil
}

// FreePort is a TCP port on loopback nobody listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
