package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
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

func TestRunServesWinRMOverHTTPS(t *testing.T) {
	g := NewWithT(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--ca-out", caFile, "--user", "ops=pa55word",
			"--log-level", "WARN"}, &stdout, &stderr)
	}()
	urlRe := regexp.MustCompile(`listening on (https://\S+/wsman)`)
	g.Eventually(stdout.String).WithTimeout(10 * time.Second).Should(MatchRegexp(urlRe.String()))
	endpoint := urlRe.FindStringSubmatch(stdout.String())[1]
	ca, err := os.ReadFile(caFile)
	g.Expect(err).NotTo(HaveOccurred())

	c, err := winrmclient.New(winrmclient.Config{Endpoint: endpoint, Username: "ops", Password: "pa55word", CABundle: ca})
	g.Expect(err).NotTo(HaveOccurred())
	res, err := c.RunPowerShell(ctx, "Get-VM")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ExitCode).To(Equal(1), "the simulated host runs the Hyper-V provider's scripts only")
	g.Expect(res.ErrorText()).To(ContainSubstring("The term 'Get-VM' is not recognized"))

	c, err = winrmclient.New(winrmclient.Config{Endpoint: endpoint, Username: "ops", Password: "wrong", CABundle: ca})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.RunPowerShell(ctx, "Get-VM")
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))

	cancel()
	g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:5986"},
		{"--user", "nopassword"},
		{"--tls-cert", "x.pem"},
		{"--log-level", "LOUD"},
	} {
		g := NewWithT(t)
		var stdout, stderr syncBuffer
		g.Expect(run(context.Background(), args, &stdout, &stderr)).To(HaveOccurred(), args)
	}
}
