package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// Outcome is how a VM's life ended.
type Outcome string

// Outcomes.
const (
	// OutcomeJobDone: the runner ran its job and exited.
	OutcomeJobDone Outcome = "JobDone"
	// OutcomeIdle: no job started within the idle timeout.
	OutcomeIdle Outcome = "IdleTimeout"
	// OutcomeRefused: the bootstrap service refused or expired our credentials.
	OutcomeRefused Outcome = "CredentialsRefused"
	// OutcomeFailed: anything else; the VM is replaced either way.
	OutcomeFailed Outcome = "Failed"
)

// Options tune an agent; the zero value suits a VM.
type Options struct {
	// ConfigPath is the file the config came from; its join token is scrubbed after use.
	ConfigPath string
	// RetryWindow bounds retries of transient failures (network, 5xx). Default 10m, and never
	// past the join token's expiry for attestation.
	RetryWindow time.Duration
	// RetryInterval between attempts. Default 3s.
	RetryInterval time.Duration
	// StopGrace is how long run.sh may take to exit after SIGTERM. Default 30s.
	StopGrace time.Duration
	Logger    *slog.Logger
}

// Agent runs one VM's life.
type Agent struct {
	cfg    *Config
	opts   Options
	log    *slog.Logger
	td     spiffeid.TrustDomain
	bundle *x509bundle.Bundle
	// tpm holds the SVID key for method TPM; it stays open for the VM's life.
	tpm *agenttpm.Device
}

// New checks cfg's trust material.
func New(cfg *Config, opts Options) (*Agent, error) {
	td, err := spiffeid.TrustDomainFromString(cfg.TrustDomain)
	if err != nil {
		return nil, fmt.Errorf("trustDomain: %w", err)
	}
	bundle, err := x509bundle.Parse(td, []byte(cfg.CABundle))
	if err != nil {
		return nil, fmt.Errorf("caBundle: %w", err)
	}
	if opts.RetryWindow <= 0 {
		opts.RetryWindow = 10 * time.Minute
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 3 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return &Agent{cfg: cfg, opts: opts, log: opts.Logger, td: td, bundle: bundle}, nil
}

// Run attests, fetches the runner config, runs one job and powers the VM off, whatever happened:
// a VM that cannot do its one job is worth nothing and is replaced.
func (a *Agent) Run(ctx context.Context) (Outcome, error) {
	outcome, err := a.live(ctx)
	if a.tpm != nil {
		_ = a.tpm.Close()
	}
	if err != nil {
		a.log.Error("runner VM is giving up", "outcome", outcome, "err", err)
	} else {
		a.log.Info("runner VM is done", "outcome", outcome)
	}
	if perr := a.powerOff(context.WithoutCancel(ctx)); perr != nil {
		err = errors.Join(err, perr)
	}
	return outcome, err
}

func (a *Agent) live(ctx context.Context) (Outcome, error) {
	if err := checkGuest(a.cfg.Runner, runtime.GOOS, runtime.GOARCH); err != nil {
		// Before the join token is spent: the VM is of no use to the pool, and it powers off.
		return OutcomeFailed, err
	}
	creds, err := a.attest(ctx)
	a.cfg.JoinToken = "" // single use: of no value now, keep it nowhere
	a.scrubJoinToken()
	if err != nil {
		return classify(err), fmt.Errorf("attesting: %w", err)
	}
	defer creds.close()
	a.log.Info("attested", "spiffeID", creds.id.String(), "expires", creds.expires)
	client := a.mtlsClient(creds)
	rc, err := a.fetchRunnerConfig(ctx, client, creds.expires)
	if err != nil {
		return classify(err), fmt.Errorf("fetching runner config: %w", err)
	}
	if err := a.installRunner(ctx); err != nil {
		a.deregister(ctx, client)
		return OutcomeFailed, fmt.Errorf("installing runner: %w", err)
	}
	l, err := runnerLaunch(a.cfg.Runner, *rc)
	rc.Config, rc.JITConfig = "", ""
	if err != nil {
		a.deregister(ctx, client)
		return OutcomeFailed, fmt.Errorf("runner config: %w", err)
	}
	outcome, err := a.runRunner(ctx, l)
	if outcome != OutcomeJobDone {
		// A one-job runner is removed after its job; one that never took a job must be removed.
		a.deregister(ctx, client)
	}
	return outcome, err
}

func classify(err error) Outcome {
	var re *refusedError
	if errors.As(err, &re) {
		return OutcomeRefused
	}
	return OutcomeFailed
}

// scrubJoinToken removes the spent token from the config file, best effort: the file may be on a
// read-only medium, and the token is worthless once redeemed anyway.
func (a *Agent) scrubJoinToken() {
	if a.opts.ConfigPath != "" {
		scrubLines(a.opts.ConfigPath, "joinToken:")
	}
}

// scrubSPIREJoinToken removes the join token from spire-agent's configuration once the Workload
// API has answered, which proves spire-agent attested with it: it has no use left, and spire-agent
// (Restart=no) never reads the file again.
func (a *Agent) scrubSPIREJoinToken() {
	if a.cfg.SPIREAgentConfigPath != "" {
		scrubLines(a.cfg.SPIREAgentConfigPath, "join_token")
	}
}

// scrubLines drops the lines of path that start (after indentation) with prefix, best effort.
func scrubLines(path, prefix string) {
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), prefix) {
		return
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), prefix) {
			kept = append(kept, line)
		}
	}
	_ = os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o600)
}

func (a *Agent) powerOff(ctx context.Context) error {
	argv := a.cfg.PowerOffCommand
	a.log.Info("powering off", "command", strings.Join(argv, " "))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("power-off command %q: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// identityForService is the only SPIFFE ID the agent accepts from the bootstrap service.
func (a *Agent) identityForService() spiffeid.ID { return identity.BootstrapServiceID(a.td) }
