// Command fakerunner stands in for the GitHub Actions runner's run.sh in tests: started with
// --jitconfig from the fake GitHub API, it comes online, takes one job through test/fakegithub's
// runner protocol, writes the per-job worker log the real runner writes (the agent's "job started"
// signal), completes the job and exits. On SIGTERM it goes offline and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func main() {
	jit := flag.String("jitconfig", "", "encoded JIT config")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *jit); err != nil {
		fmt.Fprintln(os.Stderr, "fakerunner:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, jit string) error {
	c, err := fakegithub.NewRunnerClient(jit, nil)
	if err != nil {
		return err
	}
	if err := c.Online(ctx); err != nil {
		return err
	}
	for {
		id, err := c.Acquire(ctx)
		switch {
		case err == nil:
			return runJob(ctx, c, id)
		case !errors.Is(err, fakegithub.ErrNoJob) && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			offCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.Offline(offCtx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func runJob(ctx context.Context, c *fakegithub.RunnerClient, id int64) error {
	if err := os.MkdirAll("_diag", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join("_diag", fmt.Sprintf("Worker_%d.log", id)), []byte("job started\n"), 0o644); err != nil {
		return err
	}
	if d, err := time.ParseDuration(os.Getenv("FAKERUNNER_JOB_DURATION")); err == nil {
		time.Sleep(d)
	}
	return c.Complete(context.WithoutCancel(ctx), id, "success")
}
