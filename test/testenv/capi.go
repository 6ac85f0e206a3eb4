package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CAPIManager is the real Cluster API core manager running as a process against the environment.
type CAPIManager struct {
	cmd     *exec.Cmd
	LogPath string
}

// StartCAPIManager runs the Cluster API core controllers (built by hack/tools.sh) against e. They
// reconcile Clusters, Machines and MachineHealthChecks exactly as in a real management cluster.
// extraArgs are added to the manager's flags (e.g. --kube-api-qps). Its ports are picked free just
// before it starts, so another process can take one first: a manager that exits before it is ready
// is started again on new ports (three tries), and an error carries the end of its log, which lives
// in a directory removed with the environment.
func (e *Env) StartCAPIManager(ctx context.Context, extraArgs ...string) (*CAPIManager, error) {
	var err error
	for try := 1; try <= 3; try++ {
		var m *CAPIManager
		var exited bool
		m, exited, err = e.startCAPIManager(ctx, extraArgs)
		if err == nil || !exited || ctx.Err() != nil {
			return m, err
		}
	}
	return nil, err
}

// startCAPIManager is one try of StartCAPIManager; exited says the process ended before it was ready.
func (e *Env) startCAPIManager(ctx context.Context, extraArgs []string) (_ *CAPIManager, exited bool, _ error) {
	dir, err := os.MkdirTemp(e.dir, "capi-")
	if err != nil {
		return nil, false, err
	}
	if err := writeSelfSignedCert(dir); err != nil {
		return nil, false, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, false, err
	}
	logPath := filepath.Join(dir, "capi-manager.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, false, err
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[1])
	args := append([]string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--webhook-cert-dir=" + dir,
		"--webhook-port=" + strconv.Itoa(ports[0]),
		"--health-addr=" + health,
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(ports[2]),
		"--insecure-diagnostics",
		"--leader-elect=false",
		"--sync-period=1m",
	}, extraArgs...)
	cmd := exec.Command(e.Tools.CAPIManager(), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the test process, even when it is killed on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, false, fmt.Errorf("starting %s: %w", e.Tools.CAPIManager(), err)
	}
	m := &CAPIManager{cmd: cmd, LogPath: logPath}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, false, nil
			}
		}
		select {
		case <-done:
			return nil, true, fmt.Errorf("Cluster API manager exited before it was ready (%s); its log ends:\n%s", cmd.ProcessState, logTail(logPath, 20))
		case <-ctx.Done():
			m.Stop()
			return nil, false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	m.Stop()
	return nil, false, fmt.Errorf("Cluster API manager not ready after 90s; its log ends:\n%s", logTail(logPath, 20))
}

// logTail is the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Stop ends the process.
func (m *CAPIManager) Stop() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeSelfSignedCert writes tls.crt and tls.key for the manager's (unused) webhook server.
func writeSelfSignedCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
