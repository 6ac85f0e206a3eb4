// Command fakebuildkiteagent stands in for buildkite-agent in tests and the local fleet. It
// accepts the real CLI's start command and flags (and their BUILDKITE_AGENT_* variables):
//
//	fakebuildkiteagent start --token T --endpoint https://host/v3 --tags "queue=linux,os=linux" \
//	    --name vm-1 --disconnect-after-job [--disconnect-after-idle-timeout 600]
//
// It registers with the agent token, pings until test/fakebuildkite hands it a job of its queue
// and tags, accepts, starts and finishes it (exit status 0, after FAKEBUILDKITEAGENT_JOB_DURATION
// if set), disconnects and exits. Like the real agent it checks the job out under
// --build-path/<agent name>/<org>/<pipeline>, which tells a watcher that a job started. The
// token may be given as file://PATH, like the real agent's. TLS trust comes from the system
// roots, so SSL_CERT_FILE points it at a test CA as it would the real agent. On SIGTERM it
// disconnects and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

type options struct {
	token, endpoint, name, tags string
	buildPath                   string
	disconnectAfterJob          bool
	idleTimeout                 int
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "start" {
		fmt.Fprintln(os.Stderr, "usage: fakebuildkiteagent start --token T --endpoint URL --tags k=v,... --disconnect-after-job")
		os.Exit(2)
	}
	opts, err := parse(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakebuildkiteagent:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "fakebuildkiteagent:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func parse(args []string) (options, error) {
	var o options
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.StringVar(&o.token, "token", env("BUILDKITE_AGENT_TOKEN", ""), "agent token, or file://PATH")
	fs.StringVar(&o.endpoint, "endpoint", env("BUILDKITE_AGENT_ENDPOINT", "https://agent.buildkite.com/v3"), "agent API endpoint")
	fs.StringVar(&o.name, "name", env("BUILDKITE_AGENT_NAME", host), "agent name")
	fs.StringVar(&o.tags, "tags", env("BUILDKITE_AGENT_TAGS", ""), "key=value tags, comma separated")
	fs.StringVar(&o.buildPath, "build-path", env("BUILDKITE_BUILD_PATH", "builds"), "where job checkouts go")
	fs.BoolVar(&o.disconnectAfterJob, "disconnect-after-job", env("BUILDKITE_AGENT_DISCONNECT_AFTER_JOB", "") == "true", "exit after one job")
	fs.IntVar(&o.idleTimeout, "disconnect-after-idle-timeout", 0, "exit after this many idle seconds (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if path, ok := strings.CutPrefix(o.token, "file://"); ok {
		data, err := os.ReadFile(path)
		if err != nil {
			return o, fmt.Errorf("reading the token: %w", err)
		}
		o.token = strings.TrimSpace(string(data))
	}
	if o.token == "" {
		return o, errors.New("missing --token")
	}
	if !o.disconnectAfterJob {
		return o, errors.New("this fake runs one job only: pass --disconnect-after-job")
	}
	return o, nil
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	c := fakebuildkite.NewAgentClient(o.endpoint, nil)
	if err := c.Register(ctx, o.token, o.name, splitTags(o.tags)); err != nil {
		return err
	}
	fmt.Printf("registered agent %s (%s)\n", o.name, c.AgentID)
	bye := func() error {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return c.Disconnect(dctx)
	}
	idleSince := time.Now()
	for {
		job, err := c.Ping(ctx)
		switch {
		case errors.Is(err, fakebuildkite.ErrDisconnectRequested):
			return bye()
		case err != nil && ctx.Err() == nil:
			return err
		case job != nil:
			if err := runJob(context.WithoutCancel(ctx), c, job, checkoutDir(o, job)); err != nil {
				return err
			}
			return bye()
		}
		if o.idleTimeout > 0 && time.Since(idleSince) > time.Duration(o.idleTimeout)*time.Second {
			fmt.Println("idle timeout reached")
			return bye()
		}
		select {
		case <-ctx.Done():
			return bye()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkoutDir is where the real agent checks a job out: <build-path>/<agent name>/<org>/<pipeline>,
// the agent name with anything but letters, digits and - . _ replaced by -.
func checkoutDir(o options, job *fakebuildkite.AgentJob) string {
	safe := strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, o.name)
	return filepath.Join(o.buildPath, safe, job.Env["BUILDKITE_ORGANIZATION_SLUG"], job.Env["BUILDKITE_PIPELINE_SLUG"])
}

func runJob(ctx context.Context, c *fakebuildkite.AgentClient, job *fakebuildkite.AgentJob, dir string) error {
	if err := c.Accept(ctx, job.ID); err != nil {
		return err
	}
	if err := c.Start(ctx, job.ID); err != nil {
		return err
	}
	// The checkout directory is the sign, visible from outside, that a job started.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("job %s started: %s\n", job.ID, job.Env["BUILDKITE_COMMAND"])
	if d, err := time.ParseDuration(os.Getenv("FAKEBUILDKITEAGENT_JOB_DURATION")); err == nil {
		time.Sleep(d)
	}
	fmt.Printf("job %s finished\n", job.ID)
	return c.Finish(ctx, job.ID, 0)
}
