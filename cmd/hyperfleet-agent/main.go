// Command hyperfleet-agent runs inside a runner VM: it attests with its single-use join token,
// fetches its one-time runner config over mTLS, runs exactly one CI job and powers the VM off.
//
//	hyperfleet-agent --config /etc/hyperfleet/agent.yaml
//	hyperfleet-agent --user-data "$PVESIM_USER_DATA" --runner-dir /tmp/runner --power-off-command 'true'
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
)

// version is set at release time (hack/release-agent.sh).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hyperfleet-agent", flag.ContinueOnError)
	configPath := fs.String("config", agent.DefaultConfigPath, "agent configuration file written by cloud-init")
	userData := fs.String("user-data", "", "read the configuration from this cloud-init user-data file instead of --config")
	runnerDir := fs.String("runner-dir", "", "override runner.directory")
	runScript := fs.String("run-script", "", "override runner.runScript (relative to the runner directory)")
	idleTimeout := fs.Duration("idle-timeout", 0, "override runner.idleTimeout")
	powerOff := fs.String("power-off-command", "", "override powerOffCommand (split on spaces)")
	workloadAPI := fs.String("workload-api-address", "", "override workloadAPIAddress (attestation SPIRE), e.g. unix:///tmp/spire/api.sock")
	spireConfig := fs.String("spire-agent-config", "", "override spireAgentConfigPath (attestation SPIRE)")
	retryWindow := fs.Duration("retry-window", 10*time.Minute, "how long to retry transient failures")
	retryInterval := fs.Duration("retry-interval", 3*time.Second, "pause between retries")
	stopGrace := fs.Duration("stop-grace", 30*time.Second, "time run.sh gets to exit after SIGTERM")
	printVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *printVersion {
		fmt.Println("hyperfleet-agent", version)
		return nil
	}
	var cfg *agent.Config
	var err error
	source := *configPath
	if *userData != "" {
		data, rerr := os.ReadFile(*userData)
		if rerr != nil {
			return rerr
		}
		cfg, err = agent.ConfigFromUserData(data, agent.DefaultConfigPath)
		source = ""
	} else {
		cfg, err = agent.LoadConfig(*configPath)
	}
	if err != nil {
		return err
	}
	if *runnerDir != "" {
		cfg.Runner.Directory = *runnerDir
	}
	if *runScript != "" {
		cfg.Runner.RunScript = *runScript
	}
	if *idleTimeout > 0 {
		cfg.Runner.IdleTimeout.Duration = *idleTimeout
	}
	if *powerOff != "" {
		cfg.PowerOffCommand = strings.Fields(*powerOff)
	}
	if *workloadAPI != "" {
		cfg.WorkloadAPIAddress = *workloadAPI
	}
	if *spireConfig != "" {
		cfg.SPIREAgentConfigPath = *spireConfig
	}
	a, err := agent.New(cfg, agent.Options{
		ConfigPath: source, RetryWindow: *retryWindow, RetryInterval: *retryInterval, StopGrace: *stopGrace,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	_, err = a.Run(ctx)
	return err
}
