// Package tpmtest starts software TPMs (swtpm) for tests of HyperFleet's TPM attestation.
package tpmtest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// InstallHint says how to get swtpm; tests fail with it rather than skip, so CI cannot pass
// without exercising the TPM path.
const InstallHint = "swtpm is not installed: run `apt-get update && apt-get install -y swtpm swtpm-tools` (the CI script does this)"

// Start runs a fresh swtpm on loopback, already started up, and returns its tcp://127.0.0.1:port
// address for tpm.Open. The process is killed when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	return startWithState(t, t.TempDir())
}

// startWithState runs swtpm on the TPM state in dir.
func startWithState(t testing.TB, dir string) string {
	t.Helper()
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		t.Fatal(InstallHint)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePortPair()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "socket", "--tpm2",
			"--server", "type=tcp,bindaddr=127.0.0.1,port="+strconv.Itoa(port),
			"--ctrl", "type=tcp,bindaddr=127.0.0.1,port="+strconv.Itoa(port+1),
			"--tpmstate", "dir="+dir,
			"--flags", "not-need-init,startup-clear")
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting swtpm: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case err := <-done:
				t.Logf("swtpm exited (%v); retrying on another port", err)
				done <- err
				goto next
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = c.Close()
				return "tcp://" + addr
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("swtpm did not listen on %s", addr)
	next:
	}
	t.Fatal("could not start swtpm")
	return ""
}

// freePortPair finds two consecutive free loopback ports (server, ctrl).
func freePortPair() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		_ = l.Close()
		if err == nil {
			_ = l2.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no two consecutive free ports on 127.0.0.1")
}
