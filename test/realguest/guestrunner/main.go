// Command guestrunner stands in for the GitHub Actions runner's run.sh inside a real guest, as
// test/fakerunner does for the process "guests": started with --jitconfig from the fake GitHub
// API, it comes online, takes one job, writes the worker log the real runner writes (the agent's
// "job started" signal), completes the job and exits, leaving the config's files in its
// directory as the real runner does; on SIGTERM it goes offline and exits. The
// fake GitHub listens on the host's loopback, which a guest reaches only at the address the
// Proxmox simulator forwards to it: connections to 127.0.0.1 go there instead, still verified
// against the fake's certificate for 127.0.0.1.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// jobDuration is how long the job "runs".
const jobDuration = 2 * time.Second

func main() {
	jit := flag.String("jitconfig", "", "encoded JIT config")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *jit); err != nil {
		fmt.Fprintln(os.Stderr, "guestrunner:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, jit string) error {
	cfg, err := fakegithub.DecodeJITConfig(jit)
	if err != nil {
		return err
	}
	// actions/runner writes the config's files (.runner, .credentials, .credentials_rsaparams)
	// into its directory and reads them from there: so does this stand-in, so that what a real
	// runner leaves on the guest's disk is there for the test to find.
	files, err := fakegithub.JITConfigFiles(jit)
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return err
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cfg.CA)) {
		return errors.New("the JIT config carries no CA certificate")
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if port, ok := strings.CutPrefix(addr, "127.0.0.1:"); ok {
				addr = net.JoinHostPort(pvesim.GuestForwardIP, port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	c, err := fakegithub.NewRunnerClient(jit, &http.Client{Timeout: 30 * time.Second, Transport: transport})
	if err != nil {
		return err
	}
	if err := c.Online(ctx); err != nil {
		return err
	}
	for {
		id, err := c.Acquire(ctx)
		switch {
		case err == nil:
			return runJob(ctx, c, id)
		case !errors.Is(err, fakegithub.ErrNoJob) && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			offCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.Offline(offCtx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func runJob(ctx context.Context, c *fakegithub.RunnerClient, id int64) error {
	if err := os.MkdirAll("_diag", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join("_diag", fmt.Sprintf("Worker_%d.log", id)), []byte("job started\n"), 0o644); err != nil {
		return err
	}
	time.Sleep(jobDuration)
	return c.Complete(context.WithoutCancel(ctx), id, "success")
}
