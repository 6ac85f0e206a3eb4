package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// childEnv makes the test binary a process that starts a control plane and waits to be killed.
const childEnv = "HYPERFLEET_TESTENV_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		e, err := Start()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("started", e.Config.Host)
		select {} // until killed
	}
	os.Exit(m.Run())
}

// TestControlPlaneDiesWithTheTestProcess kills a process that started a control plane the way a
// test timeout or Ctrl-C does, and checks etcd and kube-apiserver do not outlive it.
func TestControlPlaneDiesWithTheTestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed: the control plane cannot be tied to the test process")
	}
	g := NewWithT(t)
	self, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	child := exec.Command(self, "-test.run", "^$")
	child.Env = append(os.Environ(), childEnv+"=1")
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	line, _ := bufio.NewReader(out).ReadString('\n')
	g.Expect(line).To(HavePrefix("started"), "the child's control plane did not start: %s", line)

	children := childrenOf(child.Process.Pid)
	var names []string
	for _, pid := range children {
		names = append(names, commandName(pid))
	}
	g.Expect(names).To(ContainElements("etcd", "kube-apiserver"))

	g.Expect(child.Process.Kill()).To(Succeed())
	_ = child.Wait()
	g.Eventually(func() []int {
		var alive []int
		for _, pid := range children {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil && !zombie(pid) {
				alive = append(alive, pid)
			}
		}
		return alive
	}, 10*time.Second, 100*time.Millisecond).Should(BeEmpty(), "etcd and kube-apiserver outlived the process that started them")
}

// childrenOf lists the processes whose parent is pid (Linux /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := statField(p, 1); ok && ppid == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func commandName(pid int) string {
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(comm))
}

func zombie(pid int) bool {
	state, ok := statField(pid, 0)
	return ok && state == "Z"
}

// statField is field i after the command name in /proc/<pid>/stat: 0 state, 1 ppid.
func statField(pid, i int) (string, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return "", false
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) <= i {
		return "", false
	}
	return fields[i], true
}

// TestCAPIManagerThatExitsIsReportedAtOnce: a Cluster API manager that ends before it is ready
// (here refused its flags; in a full run, a port another process took first) is tried again, then
// reported at once with the end of its log, not after the 90 s readiness wait.
func TestCAPIManagerThatExitsIsReportedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	g := NewWithT(t)
	e, err := Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = e.Stop() }()
	started := time.Now()
	_, err = e.StartCAPIManager(t.Context(), "--no-such-flag")
	g.Expect(err).To(MatchError(ContainSubstring("exited before it was ready")))
	g.Expect(err).To(MatchError(ContainSubstring("no-such-flag")), "the error carries the log's end")
	g.Expect(time.Since(started)).To(BeNumerically("<", 60*time.Second))
}
