package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDir is where Debian's postgresql-15 package puts initdb and postgres; PGTEST_BINDIR
// overrides it.
const BinDir = "/usr/lib/postgresql/15/bin"

// superuser is the role initdb creates; every connection trusts it, on 127.0.0.1 only.
const superuser = "hyperfleet"

// unprivilegedUser runs the server when the tests run as root, which PostgreSQL refuses.
const unprivilegedUser = "nobody"

// Server is one running PostgreSQL.
type Server struct {
	bin    string
	dir    string // owned by the server's user: data/, the socket and the log
	port   int
	cred   *syscall.Credential
	nextDB int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

var (
	serversMu sync.Mutex
	servers   = map[string]*Server{} // by the DSNs Start handed out
)

// Start starts a server for t, creates a database on it and returns that database's URL. The
// server stops when t ends. Under -short the test is skipped; without PostgreSQL it fails and says
// how to install it.
func Start(t testing.TB) (dsn string) {
	t.Helper()
	s := NewServer(t)
	dsn = s.CreateDatabase(t)
	serversMu.Lock()
	servers[dsn] = s
	serversMu.Unlock()
	t.Cleanup(func() {
		serversMu.Lock()
		delete(servers, dsn)
		serversMu.Unlock()
	})
	return dsn
}

// Stop stops the server behind a DSN that Start returned, as an outage would.
func Stop(t testing.TB, dsn string) {
	t.Helper()
	lookup(t, dsn).Stop(t)
}

// Restart starts the server behind a DSN that Start returned again, on the same port and data,
// stopping it first if it runs.
func Restart(t testing.TB, dsn string) {
	t.Helper()
	lookup(t, dsn).Restart(t)
}

func lookup(t testing.TB, dsn string) *Server {
	t.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	s := servers[dsn]
	if s == nil {
		t.Fatalf("pgtest: %s was not returned by Start", dsn)
	}
	return s
}

// NewServer initialises a data directory and starts a server on it, for tests that want several
// databases on one server (CreateDatabase is much cheaper than a server). It stops when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: the test needs a PostgreSQL server")
	}
	return newServer(t)
}

// tb is what the server needs of a test: testing.TB has it, and so does ForMain's stand-in.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

func newServer(t tb) *Server {
	t.Helper()
	bin := os.Getenv("PGTEST_BINDIR")
	if bin == "" {
		bin = BinDir
	}
	for _, tool := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Fatalf("PostgreSQL 15 is not installed (%s/%s: %v); run hack/prereqs.sh, or: apt-get install postgresql-15", bin, tool, err)
		}
	}
	// Not t.TempDir: its parents are private to root, and the server's user must reach its data.
	dir, err := os.MkdirTemp("", "hyperfleet-pg-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &Server{bin: bin, dir: dir, port: freePort(t)}
	if os.Geteuid() == 0 {
		s.cred = unprivileged(t)
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", s.dataDir(), "-U", superuser, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

// unprivileged is the user the server runs as when the tests run as root.
func unprivileged(t tb) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL refuses to run as root and there is no user %q to run it as: %v", unprivilegedUser, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func freePort(t tb) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// command runs name as the server's user, in the server's directory (a cwd it cannot read
// makes PostgreSQL's tools fail), in the C locale.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	// Die with the test process, even when it is killed on a timeout: SIGQUIT is PostgreSQL's
	// immediate shutdown, which takes its backends down too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// Port is the TCP port the server listens on at 127.0.0.1, the same across restarts.
func (s *Server) Port() int { return s.port }

// DSN is the URL of database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, db)
}

// CreateDatabase creates a new, empty database and returns its URL.
func (s *Server) CreateDatabase(t testing.TB) string {
	t.Helper()
	return s.createDatabase(t)
}

func (s *Server) createDatabase(t tb) string {
	t.Helper()
	s.mu.Lock()
	s.nextDB++
	name := fmt.Sprintf("test%d", s.nextDB)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	return s.DSN(name)
}

// Stop shuts the server down (fast shutdown: sessions are cut, committed data stays).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stop(t)
}

// Restart starts the server again on the same port and data, stopping it first if it runs.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop(t)
	s.start(t)
}

func (s *Server) start(t tb) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer log.Close()
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-p", strconv.Itoa(s.port), "-h", "127.0.0.1", "-k", s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=100", "-c", "logging_collector=off")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgtest: starting postgres: %v", err)
	}
	s.cmd, s.exited, s.waitErr = cmd, make(chan struct{}), nil
	exited := s.exited
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		select {
		case <-exited:
			t.Fatalf("pgtest: postgres exited while starting:\n%s", s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: postgres did not accept connections within 30s: %v\n%s", err, s.logTail())
		}
	}
}

func (s *Server) stop(t tb) {
	t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("pgtest: postgres did not stop within 15s; killed it\n%s", s.logTail())
	}
	s.mu.Lock()
	err := s.waitErr
	s.mu.Unlock()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Errorf("pgtest: waiting for postgres: %v", err)
	}
}

// logTail is the end of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logFile())
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// ForMain starts a server and creates a database on it for a TestMain, which has no testing.TB:
// it returns the server, the database's URL and the function that stops the server and removes
// its data. A failure is returned rather than ending the process.
func ForMain() (s *Server, dsn string, stop func(), err error) {
	m := &mainTB{}
	stop = func() {
		for i := len(m.cleanups) - 1; i >= 0; i-- {
			m.cleanups[i]()
		}
	}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(mainFatal)
			if !ok {
				panic(r)
			}
			stop()
			s, dsn, stop, err = nil, "", func() {}, error(f)
		}
	}()
	s = newServer(m)
	return s, s.createDatabase(m), stop, nil
}

// mainFatal carries a Fatalf of ForMain out of the server's code.
type mainFatal struct{ msg string }

func (f mainFatal) Error() string { return f.msg }

type mainTB struct{ cleanups []func() }

func (*mainTB) Helper() {}
func (*mainTB) Fatalf(format string, args ...any) {
	panic(mainFatal{fmt.Sprintf(format, args...)})
}
func (*mainTB) Errorf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (m *mainTB) Cleanup(f func())                { m.cleanups = append(m.cleanups, f) }
