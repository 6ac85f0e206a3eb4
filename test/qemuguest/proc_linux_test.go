package qemuguest

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGuestDiesWithItsParent plays a test binary killed by its timeout while a guest runs: a
// child process starts a long-running command as Run starts QEMU, prints its PID and is killed
// with SIGKILL; the command must not outlive it.
func TestGuestDiesWithItsParent(t *testing.T) {
	if os.Getenv("QEMUGUEST_ORPHAN_CHILD") == "1" {
		runtime.LockOSThread()
		cmd := exec.Command("sleep", "300")
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			os.Exit(2)
		}
		_, _ = os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		_ = cmd.Wait()
		os.Exit(0)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestGuestDiesWithItsParent$")
	parent.Env = append(os.Environ(), "QEMUGUEST_ORPHAN_CHILD=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		t.Fatalf("the child printed no PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child printed %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the command is not running before its parent dies: %v", err)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The orphan is reparented and reaped by init (or a subreaper) once it dies; until then
		// it is a zombie, which counts as gone.
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) outlived its killed parent by 10 s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
