// Command scalemanager is HyperFleet's manager (cmd/manager) as the scale runs start it: the same
// flags, environment, controllers and defaults, plus two knobs cmd/manager keeps internal, so a
// run against the simulator's load model at time scale k polls tasks k times as often as
// production does and the ratio between polling and the model's task times stays as on real
// hardware:
//
//	HYPERFLEET_TASK_POLL_INTERVAL           how often in-flight tasks are polled (production 2s)
//	HYPERFLEET_PROVIDER_TASK_POLL_INTERVAL  how often a provider polls a task it waits for itself
package main

import (
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperfleet-io/hyperfleet/controllers"
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
	poll, err := durationEnv("HYPERFLEET_TASK_POLL_INTERVAL")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	providerPoll, err := durationEnv("HYPERFLEET_PROVIDER_TASK_POLL_INTERVAL")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "no Kubernetes configuration: set KUBECONFIG")
		os.Exit(1)
	}
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	mgr, err := manager.New(ctx, restConfig, cfg, func(o *controllers.Options) {
		o.Pace.TaskPollInterval, o.Pace.ProviderTaskPollInterval = poll, providerPoll
	})
	if err != nil {
		log.Error(err, "building the manager")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// durationEnv reads a duration from the environment; unset is zero (the controllers' default).
func durationEnv(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: not a positive duration such as 200ms", name, v)
	}
	return d, nil
}
