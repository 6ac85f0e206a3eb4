// Command manager runs HyperFleet's controllers (every kind's, docs/packages.md lists them), the
// webhook receiver of the CI platforms, metrics and health probes.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"
)

func main() {
	cfg, err := config.FromArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log, err := logging.New(cfg.LogLevel, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	log.Info("starting HyperFleet manager", "version", version, "revision", revision)
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "no Kubernetes configuration: set KUBECONFIG or run in a cluster")
		os.Exit(1)
	}
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	shutdownTracing, err := tracing.Setup(ctx, tracing.Config{
		Endpoint: cfg.OTLPEndpoint, ServiceName: cfg.OTelServiceName,
		ResourceAttributes: os.Getenv("OTEL_RESOURCE_ATTRIBUTES"),
	})
	if err != nil {
		log.Error(err, "configuring tracing")
		os.Exit(2)
	}
	runErr := manager.Run(ctx, restConfig, cfg)
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = shutdownTracing(flushCtx) // send the last spans
	cancel()
	if runErr != nil {
		log.Error(runErr, "manager stopped")
		os.Exit(1)
	}
}
