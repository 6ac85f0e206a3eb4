package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// managerProcess is HyperFleet's manager running as a child process with the installation's
// ServiceAccount token; it can be stopped and started again (a restart) and its CPU time and
// peak RSS are read from /proc before it exits.
type managerProcess struct {
	bin, kubeconfig, logPath string
	args, env                []string
	// pprof is the loopback address of the manager's /debug/pprof.
	pprof string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// cpu and peakRSS accumulate over the processes that have exited (restarts).
	cpu     time.Duration
	peakRSS int64
	starts  int
}

// buildManager builds test/scale/scalemanager into dir.
func buildManager(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "scalemanager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/scale/scalemanager")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %v: %s", err, out)
	}
	return bin, nil
}

// writeKubeconfig writes a kubeconfig that authenticates as cfg does (a ServiceAccount token).
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["scale"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["scale"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["scale"] = &clientcmdapi.Context{Cluster: "scale", AuthInfo: "scale"}
	kc.CurrentContext = "scale"
	return clientcmd.WriteToFile(*kc, path)
}

// start runs the manager; it is an error to start it twice without stop.
func (m *managerProcess) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+m.kubeconfig), m.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the test process, even when it is killed on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	m.cmd, m.done = cmd, done
	m.starts++
	return nil
}

// stop ends the manager: SIGTERM (a rolling update's graceful stop) or, with kill, SIGKILL (a
// crash or an evicted pod). Its CPU time and peak RSS are added to the totals first.
func (m *managerProcess) stop(kill bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.sampleLocked()
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	m.cmd = nil
}

// usage is the CPU time and peak RSS of every manager process so far, the running one included.
func (m *managerProcess) usage() (cpu time.Duration, peakRSS int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cpu, peak := m.cpu, m.peakRSS
	if m.cmd != nil {
		c, p := procUsage(m.cmd.Process.Pid)
		cpu += c
		peak = max(peak, p)
	}
	return cpu, peak
}

func (m *managerProcess) sampleLocked() {
	c, p := procUsage(m.cmd.Process.Pid)
	m.cpu += c
	m.peakRSS = max(m.peakRSS, p)
}

// procUsage reads a process's user+system CPU time (/proc/pid/stat, in clock ticks of 10ms) and
// its peak resident set (VmHWM in /proc/pid/status, bytes).
func procUsage(pid int) (time.Duration, int64) {
	var cpu time.Duration
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			// After "pid (comm)": state is field 0, utime 11, stime 12.
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(u+s) * 10 * time.Millisecond
			}
		}
	}
	var rss int64
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb << 10
			}
		}
	}
	return cpu, rss
}

// profileCPU saves a CPU profile of the manager over the next d to path (for `go tool pprof`).
// Errors only go to the log: a profile is a diagnosis, not a result.
func (m *managerProcess) profileCPU(ctx context.Context, d time.Duration, path string, log func(string, ...any)) {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m.pprof, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		log("CPU profile: %v", err)
		return
	}
	resp, err := (&http.Client{Timeout: d + time.Minute}).Do(req)
	if err != nil {
		log("CPU profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		log("CPU profile: %s", resp.Status)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		log("CPU profile: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(f, resp.Body); err != nil {
		log("CPU profile: %v", err)
		return
	}
	log("manager CPU profile over %s: %s", d, path)
}
