package node

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Stop stops every pod and component and removes what the node made: its directory, its
// bridge, kube-proxy's iptables rules and the kubelet's cgroups.
func (n *Node) Stop() error { return n.stop(true) }

func (n *Node) stop(removeDir bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n.kill("kubelet", 10*time.Second)
	n.removeContainers(ctx)
	n.kill("containerd", 10*time.Second)
	n.killShims()
	n.kill("kube-proxy", 5*time.Second)
	if _, err := os.Stat(filepath.Join(n.opts.NodeBin, "kube-proxy")); err == nil {
		_ = exec.CommandContext(ctx, filepath.Join(n.opts.NodeBin, "kube-proxy"), "--cleanup").Run()
	}
	for _, c := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		n.kill(c, 10*time.Second)
	}
	removeKubeletChains()
	n.unmountAll()
	_ = exec.Command("ip", "link", "del", n.opts.Bridge).Run()
	removeCgroups("kubepods")
	n.restoreSysctls()
	defer n.release()
	if removeDir {
		return os.RemoveAll(n.opts.Dir)
	}
	return nil
}

// removeContainers kills and deletes every container of the node, sandboxes included, so no shim
// or container process outlives it.
func (n *Node) removeContainers(ctx context.Context) {
	if n.exited("containerd") != nil {
		return
	}
	out, err := n.Ctr(ctx, "tasks", "ls", "-q")
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
		}
		for _, id := range strings.Fields(string(out)) {
			for i := 0; i < 20; i++ {
				if _, err := n.Ctr(ctx, "tasks", "delete", "--force", id); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if out, err := n.Ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "containers", "delete", id)
		}
	}
}

// killShims ends any runc shim still serving the node's containerd.
func (n *Node) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(cmdline), n.ContainerdSocket) {
			var pid int
			for _, c := range e.Name() {
				pid = pid*10 + int(c-'0')
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountAll detaches every mount under the node's directory, deepest first: pods' volumes,
// container root filesystems, sandboxes' network namespaces.
func (n *Node) unmountAll() { n.unmountUnder(n.opts.Dir) }

func (n *Node) unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// removeCgroups removes the kubelet's cgroup tree from every v1 hierarchy once its pods are gone.
func removeCgroups(name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

// removeKubeletChains removes the iptables chains the kubelet itself makes (kube-proxy --cleanup
// removes only its own): its canaries and the firewall chain that drops packets to 127.0.0.0/8
// from other sources.
func removeKubeletChains() {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			for exec.Command(ipt, "-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL").Run() == nil {
			}
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, chain := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"} {
				_ = exec.Command(ipt, "-t", table, "-F", chain).Run()
				_ = exec.Command(ipt, "-t", table, "-X", chain).Run()
			}
		}
	}
}
