// Command fake-github serves HyperFleet's fake GitHub API (test/fakegithub) for local fleets and
// e2e tests: GitHub App auth, JIT runner registration, runners, jobs, signed workflow_job
// webhooks and the /_fake/ runner protocol. Jobs are created with POST /_fake/jobs. It serves HTTPS
// with a generated CA by default, as GitHub does:
//
//	fake-github --listen 127.0.0.1:8090 --ca-out /tmp/fake-github-ca.pem --write-app-key /tmp/app.pem
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fake-github:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8090", "address to serve the API on")
	appID := flag.Int64("app-id", 1, "GitHub App ID the fake accepts JWTs for")
	appKey := flag.String("app-key", "", "PEM file with the App private key to use (default: generate one)")
	writeAppKey := flag.String("write-app-key", "", "write the generated App private key to this file (mode 0600)")
	install := flag.String("install", "", "comma-separated accounts (organizations) to install the App on at start")
	webhookURL := flag.String("webhook-url", "", "URL to POST signed workflow_job webhooks to")
	webhookSecret := flag.String("webhook-secret", "", "secret signing the webhooks (X-Hub-Signature-256)")
	useTLS := flag.Bool("tls", true, "serve HTTPS with a generated certificate (--tls=false serves plain HTTP)")
	writeCA := flag.String("ca-out", "", "with --tls, write the CA certificate PEM clients should trust to this file (a pool's caBundleRef)")
	logLevel := flag.String("log-level", envOr("LOG_LEVEL", "INFO"), "DEBUG, INFO, WARN or ERROR")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *appKey != "" && *writeAppKey != "" {
		return errors.New("--app-key and --write-app-key are exclusive")
	}
	opts := fakegithub.Options{
		AppID: *appID, WebhookURL: *webhookURL, WebhookSecret: *webhookSecret, TLS: *useTLS, Logger: log,
	}
	if *appKey != "" {
		pem, err := os.ReadFile(*appKey)
		if err != nil {
			return err
		}
		opts.AppKeyPEM = pem
	}
	srv, err := fakegithub.New(opts)
	if err != nil {
		return err
	}
	if *writeAppKey != "" {
		if err := os.WriteFile(*writeAppKey, srv.AppKeyPEM(), 0o600); err != nil {
			return err
		}
	}
	if err := srv.Start(*listen); err != nil {
		return err
	}
	defer srv.Close()
	if *writeCA != "" {
		if !*useTLS {
			return errors.New("--ca-out needs --tls")
		}
		if err := os.WriteFile(*writeCA, srv.CACertPEM(), 0o644); err != nil { //nolint:gosec // a public certificate
			return fmt.Errorf("--ca-out: %w", err)
		}
	}
	for _, account := range strings.Split(*install, ",") {
		if account = strings.TrimSpace(account); account != "" {
			log.Info("App installed", "account", account, "installationID", srv.InstallationID(account))
		}
	}
	log.Info("fake GitHub serving", "url", srv.URL(), "appID", srv.AppID(), "webhookURL", *webhookURL, "caFile", *writeCA)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
