// Command hv-simulator runs HyperFleet's WS-Management (WinRM) simulator (test/hvsim) as a
// process, for local fleets and end-to-end tests.
//
//	hv-simulator --listen 127.0.0.1:5986 --user 'hyperfleet=S3cret!' --ca-out /tmp/hvsim-ca.pem \
//	    --host hv1 --boot-command 'hyperfleet-agent --user-data "$HVSIM_USER_DATA"'
//
// Each process is one simulated Hyper-V host behind one WinRM endpoint, as HyperFleet reaches real
// hosts; run one per host.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// defaultUser is used when no --user is given, and printed at start.
const defaultUser = "hyperfleet=hvsim-Passw0rd"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "hv-simulator:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// run parses args, serves until ctx ends, then stops.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hv-simulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var users multiFlag
	listen := fs.String("listen", "127.0.0.1:5986", "loopback address to serve WS-Management on (/wsman)")
	fs.Var(&users, "user", "account NAME=PASSWORD for Basic and NTLM (repeatable; default: a printed one)")
	plainHTTP := fs.Bool("http", false, "serve plain HTTP (a lab's port 5985) instead of HTTPS")
	certFile := fs.String("tls-cert", "", "TLS certificate PEM (default: one signed by a generated CA)")
	keyFile := fs.String("tls-key", "", "TLS key PEM")
	caOut := fs.String("ca-out", "", "write the CA certificate PEM clients should trust to this file")
	maxShells := fs.Int("max-shells-per-user", hvsim.DefaultMaxShellsPerUser, "WinRM's MaxShellsPerUser quota")
	idle := fs.Duration("shell-idle-timeout", hvsim.DefaultShellIdleTimeout, "close shells idle this long (WinRM's IdleTimeout)")
	noBasic := fs.Bool("disable-basic", false, "turn Basic authentication off")
	noNTLM := fs.Bool("disable-ntlm", false, "turn NTLM (Negotiate) authentication off")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "INFO"), "DEBUG, INFO, WARN or ERROR")
	newExecutor := executorFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := hvsim.Options{Addr: *listen, Users: map[string]string{}, TLS: !*plainHTTP,
		MaxShellsPerUser: *maxShells, ShellIdleTimeout: *idle, DisableBasic: *noBasic, DisableNTLM: *noNTLM, Logger: logger}
	if len(users) == 0 {
		users = multiFlag{defaultUser}
	}
	for _, u := range users {
		name, pw, ok := strings.Cut(u, "=")
		if !ok || name == "" || pw == "" {
			return fmt.Errorf("--user %q: want NAME=PASSWORD", u)
		}
		opts.Users[name] = pw
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if *certFile != "" {
		if *plainHTTP {
			return errors.New("--tls-cert and --http exclude each other")
		}
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("load TLS key pair: %w", err)
		}
		opts.TLSCertificate = &cert
	}
	executor, err := newExecutor(logger)
	if err != nil {
		return err
	}
	opts.Executor = executor

	sim, err := hvsim.Start(opts)
	if err != nil {
		return err
	}
	if *caOut != "" && sim.CAPEM() != nil {
		if err := os.WriteFile(*caOut, sim.CAPEM(), 0o644); err != nil {
			_ = sim.Close()
			return fmt.Errorf("--ca-out: %w", err)
		}
		fmt.Fprintf(stdout, "CA certificate: %s\n", *caOut)
	}
	fmt.Fprintf(stdout, "WinRM simulator listening on %s\n", sim.URL())
	for _, u := range users {
		name, _, _ := strings.Cut(u, "=")
		fmt.Fprintf(stdout, "user: %s\n", name)
	}
	if len(users) == 1 && users[0] == defaultUser {
		fmt.Fprintf(stdout, "default account: %s\n", defaultUser)
	}
	logger.Info("started", "url", sim.URL())
	<-ctx.Done()
	logger.Info("shutting down", "calls", sim.Stats().Calls, "faults", sim.Stats().Faults)
	return sim.Close()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
