// Command console serves HyperFleet's operator console: the REST API under /api/v1, the web UI and
// OIDC sign-in. Settings come from the environment (see docs/console.md), secrets from mounted
// files, and everything it shows is read from the Kubernetes API and the hypervisors; its only state
// is the audit log, in the history database HISTORY_URL names.
//
//	OIDC_ISSUER_URL=https://login.example.com/tenant/v2.0 OIDC_CLIENT_ID=... OIDC_ROLE_NAME=HyperFleet.Operator \
//	PUBLIC_URL=https://console.example.com console
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	settings, err := console.LoadSettings(os.Getenv)
	if err != nil {
		return err
	}
	log, err := logging.New(settings.LogLevel, os.Stderr)
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	srv, err := console.New(ctx, console.Options{Settings: settings, Config: cfg, Scheme: api.NewScheme(), Log: log})
	if err != nil {
		return err
	}
	go func() { _ = srv.Inventory().Start(ctrl.LoggerInto(ctx, log)) }()
	l, err := net.Listen("tcp", settings.Listen)
	if err != nil {
		return err
	}
	log.Info("console serving", "listen", l.Addr().String(), "publicURL", settings.PublicURL, "issuer", settings.IssuerURL,
		"version", version, "revision", revision)
	return srv.Serve(ctx, l)
}
