// Command manager runs HyperFleet's controllers: HypervisorCluster, MachineClaim(Template),
// BootstrapConfig and RunnerPool, with metrics and health probes.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
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
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "no Kubernetes configuration: set KUBECONFIG or run in a cluster")
		os.Exit(1)
	}
	if err := manager.Run(ctrl.SetupSignalHandler(), restConfig, cfg); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
