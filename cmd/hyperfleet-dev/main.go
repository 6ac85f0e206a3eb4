// Command hyperfleet-dev runs a whole HyperFleet fleet on one machine and drives it:
//
//	hyperfleet-dev up                               # make dev: start everything, Ctrl-C stops it
//	hyperfleet-dev up --platform=gitlab             # make dev DEV_FLAGS=--platform=gitlab: a GitLab pool
//	hyperfleet-dev up --hypervisor=both             # make dev DEV_FLAGS=--hypervisor=both: one pool over Proxmox and Hyper-V
//	hyperfleet-dev up --hypervisor=all              # one pool over Proxmox, Hyper-V and vSphere
//	hyperfleet-dev up --platform=buildkite          # a Buildkite pool of the fake Buildkite's queue
//	hyperfleet-dev up --platform=all                # a mixed fleet: a GitHub, a GitLab and a Buildkite pool
//	hyperfleet-dev jobs --count 20 --labels linux,x64 # make jobs: queue jobs on the pool's fake platform
//	hyperfleet-dev status                           # the pool, its Machines, claims, VMs and jobs
//	hyperfleet-dev node --import bin/images/manager-linux-amd64.tar # make node: a real single-node Kubernetes
//
// up writes .hyperfleet/dev/state.json (see docs/local-fleet.md); the other commands read it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

const usage = `usage: hyperfleet-dev <command> [flags]

commands:
  up       start the local fleet and apply the sample RunnerPool; Ctrl-C stops everything
  jobs     queue jobs on the sample pool's fake platform (it sends its webhooks to the fleet)
  status   print the pool, its Machines and MachineClaims, the VMs and the jobs
  node     start a real single-node Kubernetes (kubelet on containerd; needs root); Ctrl-C stops it

Run "hyperfleet-dev <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, stop, os.Args[2:], os.Stdout)
	case "jobs":
		err = jobs(ctx, os.Args[2:], os.Stdout)
	case "status":
		err = status(ctx, os.Args[2:], os.Stdout)
	case "node":
		err = nodeCmd(ctx, os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-dev:", err)
		os.Exit(1)
	}
}

func defaultStateDir() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		return filepath.Join(".hyperfleet", "dev")
	}
	return devfleet.DefaultStateDir(root)
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// relative shortens path for printing when it lies under the working directory.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func up(ctx context.Context, stopSignals func(), args []string, out io.Writer) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	stateDir := fs.String("state-dir", defaultStateDir(), "directory for state.json, the kubeconfig, binaries and logs (emptied at start)")
	namespace := fs.String("namespace", devfleet.DefaultNamespace, "namespace of the sample fleet")
	minReplicas := fs.Int("min", 1, "the RunnerPool's minReplicas")
	maxReplicas := fs.Int("max", 5, "the RunnerPool's maxReplicas")
	labels := fs.String("labels", strings.Join(devfleet.DefaultLabels, ","), "the RunnerPool's runner labels (Buildkite: agent tags key=value, default os=linux,arch=x64)")
	platform := fs.String("platform", devfleet.PlatformGitHub, "CI platform of the sample pool: github, gitlab (a fake GitLab; the pool serves the group named by --org) or buildkite (a fake Buildkite; the pool serves --queue); a comma-separated list or all for a mixed fleet of one pool per platform on the one hypervisor")
	hypervisor := fs.String("hypervisor", devfleet.HypervisorProxmox, "where the sample pool's VMs run: proxmox (the Proxmox simulator), hyperv (the Hyper-V WS-Management simulator), vsphere (VMware's vCenter simulator), both (one pool over Proxmox and Hyper-V) or all (one pool over the three)")
	queue := fs.String("queue", devfleet.DefaultQueue, "the Buildkite pool's queue")
	org := fs.String("org", devfleet.DefaultOrganization, "GitHub organization (GitLab: group) the pool serves")
	repo := fs.String("repo", "", "GitHub repository owner/name the pool serves instead of the organization")
	jobDuration := fs.Duration("job-duration", 3*time.Second, "how long each fake job runs")
	logLevel := fs.String("log-level", "INFO", "log level of the component logs under <state-dir>/logs")
	quiet := fs.Bool("quiet", false, "do not print VM events and pool changes")
	identity := fs.String("identity", devfleet.IdentityBuiltin, "who attests the VMs: Builtin (the bootstrap service's CA) or SPIRE (a local spire-server; each VM runs spire-agent)")
	noConsole := fs.Bool("no-console", false, "do not start the operator console and its identity provider")
	consoleListen := fs.String("console-listen", "127.0.0.1:0", "address of the operator console (127.0.0.1 only: it serves plain http)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	feed := newFeed(out, *quiet)
	opts := devfleet.Options{
		StateDir: *stateDir, Namespace: *namespace, JobDuration: *jobDuration, LogLevel: *logLevel, Identity: *identity,
		Platform: *platform, Hypervisor: *hypervisor,
		Pool: devfleet.PoolOptions{Min: int32(*minReplicas), Max: int32(*maxReplicas), Labels: splitList(*labels),
			Organization: *org, Repository: *repo, Queue: *queue},
		NoConsole: *noConsole, ConsoleListen: *consoleListen,
		OnVMEvent: feed.vmEvent,
		Progress:  func(s string) { fmt.Fprintf(out, "  %s...\n", s) },
	}
	started := time.Now()
	fmt.Fprintln(out, "Starting the HyperFleet local fleet:")
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	fleet, err := devfleet.Start(startCtx, opts)
	cancel()
	if err != nil {
		return err
	}
	s := fleet.State
	fmt.Fprintf(out, `
HyperFleet local fleet is up (%s). RunnerPool %s/%s: min %d, max %d, labels %s.

  export KUBECONFIG=%s
  %s get runnerpools,machines,machineclaims -A
  go run ./cmd/hyperfleet-dev jobs --count 20 --labels %s     # or: make jobs
  go run ./cmd/hyperfleet-dev status

State: %s   Logs: %s
Webhook receiver: %s   Proxmox simulator: %s   fake GitHub: %s%s
VM identity: %s
%s
Press Ctrl-C to stop everything.

`, time.Since(started).Round(time.Second), s.Namespace, s.Pool, fleet.PoolOptions().Min, fleet.PoolOptions().Max,
		strings.Join(fleet.PoolOptions().Labels, ","), relative(s.Kubeconfig), s.Kubectl,
		jobLabels(s, fleet.PoolOptions()), relative(filepath.Join(*stateDir, devfleet.StateFileName)),
		relative(s.LogDir), s.Webhook.URL, s.Proxmox.URL, s.GitHub.URL, gitlabLine(s)+buildkiteLine(s)+hypervisorsLine(s)+poolsLine(s), identityLine(s), consoleLines(s))

	feed.watch(ctx, fleet)
	// A second Ctrl-C while stopping ends the process at once.
	stopSignals()
	fmt.Fprintln(out, "\nStopping: manager, VMs and their agents, Cluster API manager, kube-apiserver and etcd...")
	done := make(chan struct{})
	go func() { fleet.Stop(); close(done) }()
	select {
	case <-done:
		fmt.Fprintln(out, "Stopped. Logs stay in", relative(s.LogDir))
		return nil
	case <-time.After(90 * time.Second):
		return errors.New("stopping took longer than 90s")
	}
}

// consoleLines tell a person where the console is and how to sign in.
func consoleLines(s devfleet.State) string {
	c := s.Console
	if c == nil {
		return ""
	}
	out := fmt.Sprintf(`
Operator console: %s
  sign in as %s / %s (create and delete VMs in %s), or %s / %s (read-only)
  template for new VMs: %d (ubuntu-2404-runner), cluster %s/%s
`, c.URL, c.Username, c.Password, s.Namespace, devfleet.ConsoleViewer, c.ViewerPassword,
		devfleet.RunnerTemplateVMID, s.Namespace, devfleet.HypervisorClusterName)
	if c.TokenFile != "" {
		out += fmt.Sprintf(`Terraform (docs/terraform.md): provider "hyperfleet" { endpoint = %q, token_file = %q, allow_insecure_http = true }
`, c.URL, c.TokenFile)
	}
	return out
}

// gitlabLine names the fake GitLab of a GitLab pool.
func gitlabLine(s devfleet.State) string {
	if s.GitLab == nil {
		return ""
	}
	return fmt.Sprintf("\nfake GitLab: %s (pool serves group %s; jobs go to %s; Job Hooks to %s)",
		s.GitLab.URL, s.GitLab.Group, s.GitLab.Project, s.GitLab.WebhookURL)
}

// jobLabels are what the hint's jobs command asks for: the pool's labels, or for a Buildkite
// pool the agent query rule of its queue (its tags alone would target the default queue).
func jobLabels(s devfleet.State, p devfleet.PoolOptions) string {
	if s.Buildkite != nil && len(s.Pools) == 0 { // a mixed fleet's jobs go to GitHub by default

		return "queue=" + s.Buildkite.Queue
	}
	return strings.Join(p.Labels, ",")
}

// buildkiteLine names the fake Buildkite of a Buildkite pool.
func buildkiteLine(s devfleet.State) string {
	if s.Buildkite == nil {
		return ""
	}
	return fmt.Sprintf("\nfake Buildkite: %s (pool serves queue %s of cluster %s; builds go to pipeline %s; signed job events to %s)",
		s.Buildkite.URL, s.Buildkite.Queue, s.Buildkite.Cluster, s.Buildkite.Pipeline, s.Buildkite.WebhookURL)
}

// poolsLine lists a mixed fleet's pools.
// hypervisorsLine names the other simulators the fleet runs.
func hypervisorsLine(s devfleet.State) string {
	out := ""
	if hv := s.HyperV; hv != nil {
		out += fmt.Sprintf("\nHyper-V simulator: %s (host %s, user %s, CA %s)", hv.URL, hv.Host, hv.Username, relative(hv.CAFile))
	}
	if vc := s.VSphere; vc != nil {
		out += fmt.Sprintf("\nvCenter simulator: %s (user %s, CA %s, datacenter %s, compute cluster %s)", vc.URL, vc.Username, relative(vc.CAFile), vc.Datacenter, vc.Cluster)
	}
	return out
}

func poolsLine(s devfleet.State) string {
	if len(s.Pools) == 0 {
		return ""
	}
	var pools []string
	for _, p := range s.Pools {
		pools = append(pools, fmt.Sprintf("%s (%s)", p.Name, p.Platform))
	}
	return "\nmixed fleet, one pool per platform: " + strings.Join(pools, ", ") + "; make jobs JOB_PLATFORM=<platform>"
}

// identityLine says who attests the fleet's VMs.
func identityLine(s devfleet.State) string {
	if s.SPIRE == nil {
		return "builtin CA of the bootstrap service at " + s.Bootstrap.URL
	}
	return fmt.Sprintf("SPIRE (server %s, admin API %s; bootstrap service SPIRE endpoint %s)",
		s.SPIRE.AgentServerAddress, s.SPIRE.AdminAddress, s.Bootstrap.SPIREURL)
}
