package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writer and reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestRunServesAndBootsVMsWithTheCommand(t *testing.T) {
	g := NewWithT(t)
	proxmox.DefaultWaitInterval = 20 * time.Millisecond
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	outFile := filepath.Join(dir, "booted")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", "127.0.0.1:0", "--ca-out", caFile,
			"--token", "hyperfleet@pve!e2e=secret-1",
			"--task-duration", "20ms", "--boot-delay", "20ms", "--log-level", "WARN",
			"--boot-command", `echo "$PVESIM_VMID $PVESIM_NODE $PVESIM_VM_NAME" > ` + outFile + `; cat "$PVESIM_USER_DATA" >> ` + outFile,
		}, &stdout, &stderr)
	}()
	urlRe := regexp.MustCompile(`listening on (https://\S+)`)
	g.Eventually(stdout.String).WithTimeout(10 * time.Second).Should(MatchRegexp(urlRe.String()))
	url := urlRe.FindStringSubmatch(stdout.String())[1]
	g.Expect(stdout.String()).To(ContainSubstring("API token: PVEAPIToken=hyperfleet@pve!e2e=secret-1"))

	pem, err := os.ReadFile(caFile)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(pem)).To(BeTrue())
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	c := proxmox.NewClient(url, proxmox.WithHTTPClient(hc), proxmox.WithAPIToken("hyperfleet@pve!e2e", "secret-1"))

	tctx, tcancel := context.WithTimeout(ctx, 20*time.Second)
	defer tcancel()
	node, err := c.Node(tctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := node.VirtualMachine(tctx, 9000)
	g.Expect(err).NotTo(HaveOccurred())
	_, task, err := tmpl.Clone(tctx, &proxmox.VirtualMachineCloneOptions{NewID: 700, Name: "e2e-700"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.Wait(tctx, 10*time.Millisecond, 5*time.Second)).To(Succeed())
	vm, err := node.VirtualMachine(tctx, 700)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.CloudInit(tctx, "ide2", "#cloud-config\nfoo: bar\n", "instance-id: e2e\n", "", "")).To(Succeed())
	task, err = vm.Start(tctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.Wait(tctx, 10*time.Millisecond, 5*time.Second)).To(Succeed())
	g.Expect(task.IsSuccessful).To(BeTrue())

	g.Eventually(func() string { b, _ := os.ReadFile(outFile); return string(b) }).WithTimeout(10 * time.Second).
		Should(Equal("700 pve1 e2e-700\n#cloud-config\nfoo: bar\n"))
	// The command exited, so the guest powered off.
	g.Eventually(func() string {
		_ = vm.Ping(tctx)
		return vm.Status
	}).WithTimeout(10 * time.Second).Should(Equal("stopped"))

	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"token without secret", []string{"--token", "root@pam!x"}, "want USER@REALM!TOKENID=SECRET"},
		{"user without realm", []string{"--user", "root=pw"}, "want USER@REALM=PASSWORD"},
		{"cert without key", []string{"--tls-cert", "a.pem"}, "--tls-cert and --tls-key go together"},
		{"bad log level", []string{"--log-level", "LOUD"}, "--log-level"},
		{"missing inventory", []string{"--inventory", "/nonexistent/inv.yaml"}, "read inventory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var out, errOut syncBuffer
			err := run(context.Background(), append([]string{"--listen", "127.0.0.1:0"}, tc.args...), &out, &errOut)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(strings.Contains(out.String(), "listening")).To(BeFalse())
		})
	}
}
