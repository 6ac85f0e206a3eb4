package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NodeName is the name the kubelet registers.
const NodeName = "hyperfleet-node"

// PauseImage is the pod sandbox image the node builds and imports itself (package pause).
const PauseImage = "hyperfleet.test/pause:1"

// Options say where the node's binaries are and where it keeps its state.
type Options struct {
	// Dir holds everything the node writes; it is removed by Stop. Required.
	Dir string
	// K8sBin holds etcd, kube-apiserver and kubectl (hack/tools.sh's k8s/).
	K8sBin string
	// NodeBin holds kubelet, kube-controller-manager, kube-scheduler and kube-proxy
	// (hack/tools.sh --node's node/).
	NodeBin string
	// RepoRoot is the module's checkout: the pause image is built from it.
	RepoRoot string
	// CNIBinDir holds the bridge and host-local plugins (default /usr/lib/cni, Debian's
	// containernetworking-plugins).
	CNIBinDir string
	// Bridge is the name of the pods' bridge (default hfnode0).
	Bridge string
	// PodCIDR is the pods' subnet; its first address is the node's own on the bridge, where the
	// API server listens (default 10.213.0.0/24).
	PodCIDR string
	// ServiceCIDR is the Services' range (default 10.213.1.0/24).
	ServiceCIDR string
	// Log receives the node's progress lines; each component's output goes to Dir/logs.
	Log io.Writer
}

// Node is a running single-node cluster.
type Node struct {
	opts Options
	// Gateway is the node's address on the pods' bridge: the API server, the kubelet and
	// anything a test serves to pods listen there.
	Gateway netip.Addr
	// Server is the API server's URL.
	Server string
	// AdminKubeconfig is a kubeconfig of a cluster administrator (system:masters).
	AdminKubeconfig string
	// ContainerdSocket is the node's containerd's socket (ctr --address).
	ContainerdSocket string

	pki   *pki
	ports struct {
		etcd, etcdPeer, apiserver, kubelet, kubeletHealth, proxyHealth, proxyMetrics int
	}
	mu    sync.Mutex
	procs map[string]*proc
	// lock is held while the node runs: one node per machine (its bridge and CIDRs are fixed).
	lock *os.File
	// sysctls are the kernel settings the kubelet changes, as they were before it started.
	sysctls map[string]string
}

// kubeletSysctls are the settings the kubelet sets on start; Stop puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// acquire waits for the machine-wide node lock: tests of several packages may each start a node.
func (n *Node) acquire(ctx context.Context) error {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "hyperfleet-node.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			n.lock = f
			return nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("node: waiting for another node on this machine to stop: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (n *Node) release() {
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
		n.lock = nil
	}
}

func (n *Node) saveSysctls() {
	n.sysctls = map[string]string{}
	for _, k := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			n.sysctls[k] = strings.TrimSpace(string(b))
		}
	}
}

func (n *Node) restoreSysctls() {
	for k, v := range n.sysctls {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v+"\n"), 0o644)
	}
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start brings up the node and returns once it is Ready. On error everything started is stopped.
func Start(ctx context.Context, o Options) (n *Node, err error) {
	if o.Dir == "" {
		return nil, errors.New("node: Options.Dir is required")
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
	if o.Bridge == "" {
		o.Bridge = "hfnode0"
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.213.0.0/24"
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.213.1.0/24"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	pods, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("node: pod CIDR: %w", err)
	}
	svc, err := netip.ParsePrefix(o.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("node: service CIDR: %w", err)
	}
	if err := preflight(o); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	n = &Node{opts: o, Gateway: pods.Masked().Addr().Next(), procs: map[string]*proc{}}
	n.ContainerdSocket = n.path("containerd", "containerd.sock")
	if err := n.acquire(ctx); err != nil {
		return nil, err
	}
	n.saveSysctls()
	defer func() {
		if err != nil {
			n.logf("start failed: %v; component logs in %s", err, n.path("logs"))
			// The tail of each log: a test's temporary directory goes with the test.
			logs, _ := filepath.Glob(n.path("logs", "*.log"))
			for _, l := range logs {
				if b, rerr := os.ReadFile(l); rerr == nil && len(b) > 0 {
					n.logf("%s (last 2 kB):\n%s", filepath.Base(l), b[max(0, len(b)-2048):])
				}
			}
			_ = n.stop(false)
		}
	}()
	for _, d := range []string{"logs", "etcd", "cni/net.d", "cni/ipam", "pod-logs", "volume-plugins", "kubelet"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return n, err
		}
	}
	if err := writeFile(n.path("resolv.conf"), "# pods of the test node resolve nothing\n"); err != nil {
		return n, err
	}
	for _, p := range []*int{&n.ports.etcd, &n.ports.etcdPeer, &n.ports.apiserver, &n.ports.kubelet, &n.ports.kubeletHealth, &n.ports.proxyHealth, &n.ports.proxyMetrics} {
		if *p, err = freePort(); err != nil {
			return n, err
		}
	}
	if err := n.makeBridge(); err != nil {
		return n, err
	}
	kubeSvcIP := svc.Masked().Addr().Next()
	if n.pki, err = newPKI(n.path("pki"), []net.IP{n.Gateway.AsSlice(), kubeSvcIP.AsSlice(), net.IPv4(127, 0, 0, 1)}); err != nil {
		return n, err
	}
	n.Server = "https://" + net.JoinHostPort(n.Gateway.String(), strconv.Itoa(n.ports.apiserver))
	if n.AdminKubeconfig, err = n.pki.kubeconfig("admin", n.Server); err != nil {
		return n, err
	}

	start := time.Now()
	if err := n.startEtcd(ctx); err != nil {
		return n, err
	}
	if err := n.startAPIServer(ctx); err != nil {
		return n, err
	}
	if err := n.startControllers(); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err := n.importPause(ctx); err != nil {
		return n, err
	}
	if err := n.startKubeletOnCRI(ctx); err != nil {
		return n, err
	}
	if err := n.startKubeProxy(); err != nil {
		return n, err
	}
	if err := n.waitNodeReady(ctx); err != nil {
		return n, err
	}
	n.logf("node %s Ready %.1fs after start; API server %s", NodeName, time.Since(start).Seconds(), n.Server)
	return n, nil
}

// preflight names what is missing before anything is started.
func preflight(o Options) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (kubelet, containerd and the bridge need it)")
	}
	for _, b := range []string{filepath.Join(o.K8sBin, "etcd"), filepath.Join(o.K8sBin, "kube-apiserver"), filepath.Join(o.K8sBin, "kubectl"),
		filepath.Join(o.NodeBin, "kubelet"), filepath.Join(o.NodeBin, "kube-controller-manager"),
		filepath.Join(o.NodeBin, "kube-scheduler"), filepath.Join(o.NodeBin, "kube-proxy"),
		filepath.Join(o.CNIBinDir, "bridge"), filepath.Join(o.CNIBinDir, "host-local")} {
		if _, err := os.Stat(b); err != nil {
			missing = append(missing, b+" (hack/tools.sh --node, hack/prereqs.sh)")
		}
	}
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c+" (hack/prereqs.sh)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("node: cannot start: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.opts.Dir}, elem...)...)
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.opts.Log, "[node %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// makeBridge creates the pods' bridge with the node's address before any pod exists, so that the
// API server can listen there from the start; the CNI bridge plugin then uses it as it is.
func (n *Node) makeBridge() error {
	_ = exec.Command("ip", "link", "del", n.opts.Bridge).Run() // left over from a killed run
	prefix, _ := netip.ParsePrefix(n.opts.PodCIDR)
	addr := netip.PrefixFrom(n.Gateway, prefix.Bits()).String()
	for _, args := range [][]string{
		{"link", "add", n.opts.Bridge, "type", "bridge"},
		{"addr", "add", addr, "dev", n.opts.Bridge},
		{"link", "set", n.opts.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("node: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// run starts a component with its output in Dir/logs/<name>.log. Components die with this process.
func (n *Node) run(name, bin string, args ...string) error {
	logf, err := os.OpenFile(n.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("node: starting %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	n.mu.Lock()
	n.procs[name] = p
	n.mu.Unlock()
	return nil
}

// kill stops a component: SIGTERM, then SIGKILL after grace.
func (n *Node) kill(name string, grace time.Duration) {
	n.mu.Lock()
	p := n.procs[name]
	delete(n.procs, name)
	n.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports a component that is no longer running.
func (n *Node) exited(name string) error {
	n.mu.Lock()
	p := n.procs[name]
	n.mu.Unlock()
	if p == nil {
		return fmt.Errorf("node: %s is not running", name)
	}
	select {
	case <-p.done:
		return fmt.Errorf("node: %s exited (%v); see %s", name, p.cmd.ProcessState, n.path("logs", name+".log"))
	default:
		return nil
	}
}

// startEtcd starts etcd on the ports picked for it. A port picked free may be taken by another
// process before etcd binds it (tests on a busy machine start API servers side by side): etcd
// then exits at once, and it is started again on new ports, up to three times.
func (n *Node) startEtcd(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if attempt > 1 {
			n.logf("etcd exited at start (%v); trying new ports", err)
			n.kill("etcd", time.Second)
			if err := os.RemoveAll(n.path("etcd")); err != nil {
				return err
			}
			for _, p := range []*int{&n.ports.etcd, &n.ports.etcdPeer} {
				if *p, err = freePort(); err != nil {
					return err
				}
			}
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", n.ports.etcd)
		peer := fmt.Sprintf("http://127.0.0.1:%d", n.ports.etcdPeer)
		if err := n.run("etcd", filepath.Join(n.opts.K8sBin, "etcd"),
			"--name=node", "--data-dir="+n.path("etcd"), "--listen-client-urls="+client, "--advertise-client-urls="+client,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=node="+peer,
			"--unsafe-no-fsync", "--log-level=warn"); err != nil {
			return err
		}
		exited := false
		err = n.poll(ctx, "etcd", 60*time.Second, func() error {
			if err := n.exited("etcd"); err != nil {
				exited = true
				return backoffStop{err}
			}
			resp, err := http.Get(client + "/health")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("etcd health %d", resp.StatusCode)
			}
			return nil
		})
		if err == nil || !exited {
			return err
		}
	}
	return err
}

func (n *Node) startAPIServer(ctx context.Context) error {
	p := n.pki.path
	if err := n.run("kube-apiserver", filepath.Join(n.opts.K8sBin, "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", n.ports.etcd),
		"--bind-address="+n.Gateway.String(), "--advertise-address="+n.Gateway.String(),
		fmt.Sprintf("--secure-port=%d", n.ports.apiserver),
		"--cert-dir="+n.path("apiserver"),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"), "--token-auth-file="+p("tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-cluster-ip-range="+n.opts.ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--allow-privileged=false",
		"--profiling=false", "--v=1"); err != nil {
		return err
	}
	ca, err := os.ReadFile(p("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return n.poll(ctx, "kube-apiserver", 120*time.Second, func() error {
		req, _ := http.NewRequest(http.MethodGet, n.Server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+n.pki.tokens["admin"])
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
}

func (n *Node) startControllers() error {
	cm, err := n.pki.kubeconfig("system:kube-controller-manager", n.Server)
	if err != nil {
		return err
	}
	if err := n.run("kube-controller-manager", filepath.Join(n.opts.NodeBin, "kube-controller-manager"),
		"--kubeconfig="+cm, "--authentication-kubeconfig="+cm, "--authorization-kubeconfig="+cm,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+n.pki.path("sa.key"), "--root-ca-file="+n.pki.path("ca.crt"),
		"--controllers=*,-bootstrapsigner,-tokencleaner",
		"--v=1"); err != nil {
		return err
	}
	sched, err := n.pki.kubeconfig("system:kube-scheduler", n.Server)
	if err != nil {
		return err
	}
	return n.run("kube-scheduler", filepath.Join(n.opts.NodeBin, "kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false", "--v=1")
}

func (n *Node) startContainerd(ctx context.Context) error {
	cfg := n.path("containerd", "config.toml")
	if err := writeFile(cfg, n.containerdConfig()); err != nil {
		return err
	}
	if err := writeFile(n.path("cni", "net.d", "10-hyperfleet-node.conflist"), n.cniConfig()); err != nil {
		return err
	}
	if err := n.run("containerd", "containerd", "--config", cfg); err != nil {
		return err
	}
	return n.poll(ctx, "containerd", 60*time.Second, func() error {
		_, err := n.Ctr(ctx, "version")
		return err
	})
}

// Ctr runs containerd's ctr against the node's containerd, in Kubernetes' namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// ImportImage loads an image archive (docker-archive or OCI tarball) into the node, as a pull
// would have: pods name it and never pull.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.Ctr(ctx, "images", "import", "--no-unpack=false", "--platform", "linux/"+goarch(), archive)
	return err
}

func (n *Node) startKubelet() error {
	kc, err := n.pki.kubeconfig("system:node:"+NodeName, n.Server)
	if err != nil {
		return err
	}
	cfg := n.path("kubelet", "config.yaml")
	if err := writeFile(cfg, n.kubeletConfig()); err != nil {
		return err
	}
	return n.run("kubelet", filepath.Join(n.opts.NodeBin, "kubelet"),
		"--config="+cfg, "--kubeconfig="+kc, "--root-dir="+n.path("kubelet"), "--cert-dir="+n.path("kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+n.Gateway.String(), "--v=1")
}

func (n *Node) startKubeProxy() error {
	kc, err := n.pki.kubeconfig("system:kube-proxy", n.Server)
	if err != nil {
		return err
	}
	cfg := n.path("kube-proxy.yaml")
	if err := writeFile(cfg, n.kubeProxyConfig(kc)); err != nil {
		return err
	}
	return n.run("kube-proxy", filepath.Join(n.opts.NodeBin, "kube-proxy"), "--config="+cfg, "--v=1")
}

// Reboot restarts the node as a machine restart would: the kubelet and containerd stop, every
// container dies with them, then both start again and the kubelet recreates its pods.
func (n *Node) Reboot(ctx context.Context) error {
	n.kill("kubelet", 10*time.Second)
	n.removeContainers(ctx)
	n.kill("containerd", 10*time.Second)
	n.killShims()
	n.unmountUnder(n.path("containerd"))
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.startKubeletOnCRI(ctx); err != nil {
		return err
	}
	return n.waitNodeReady(ctx)
}

// startKubeletOnCRI starts the kubelet and starts it again while it exits at once: containerd
// answers its own API (what startContainerd waits for) before its CRI plugin has initialised,
// above all after a restart with containers to recover, and a kubelet started then fails its
// runtime check ("server is not initialized yet") and exits. A full run once hung for its whole
// timeout on a node that never came back from a reboot that way.
func (n *Node) startKubeletOnCRI(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		if err := n.startKubelet(); err != nil {
			return err
		}
		var err error
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			if err = n.exited("kubelet"); err != nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		if err == nil {
			return nil
		}
		if attempt == 20 {
			return err
		}
		n.logf("kubelet exited at start (%v); starting it again", err)
	}
}

// Kubectl runs kubectl as the cluster administrator.
func (n *Node) Kubectl(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.opts.K8sBin, "kubectl"), append([]string{"--kubeconfig", n.AdminKubeconfig}, args...)...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

func (n *Node) waitNodeReady(ctx context.Context) error {
	return n.poll(ctx, "node Ready", 120*time.Second, func() error {
		for _, c := range []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler", "containerd"} {
			if err := n.exited(c); err != nil {
				return backoffStop{err}
			}
		}
		out, err := n.Kubectl(ctx, nil, "get", "node", NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(out)) != "True" {
			return fmt.Errorf("node Ready=%q", out)
		}
		// Pods are refused until the controller manager made the namespace's service account.
		if _, err := n.Kubectl(ctx, nil, "get", "serviceaccount", "default", "-n", "default"); err != nil {
			return err
		}
		return nil
	})
}

type backoffStop struct{ error }

// poll retries check every 250 ms until it passes, fails for good, or timeout.
func (n *Node) poll(ctx context.Context, what string, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop backoffStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: %s not ready after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
