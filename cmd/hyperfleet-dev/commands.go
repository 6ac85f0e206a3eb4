package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

func jobs(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	stateDir := fs.String("state-dir", defaultStateDir(), "the running fleet's state directory")
	count := fs.Int("count", 20, "number of jobs to queue")
	labels := fs.String("labels", "", "runs-on labels (GitLab: tags) of the jobs, default linux,x64; Buildkite: agent query rules key=value, default queue=<the pool's queue>")
	repo := fs.String("repo", "", "repository owner/name (GitLab: project path; Buildkite: pipeline) of the jobs; default the fleet's")
	platform := fs.String("platform", "", "platform of the jobs in a mixed fleet: github (default), gitlab or buildkite")
	wait := fs.Bool("wait", false, "wait until every job completed, printing progress")
	timeout := fs.Duration("timeout", 15*time.Minute, "with --wait, give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *count < 1 || *count > 1000 {
		return fmt.Errorf("--count must be between 1 and 1000")
	}
	s, err := devfleet.ReadState(*stateDir)
	if err != nil {
		return err
	}
	if *platform != "" {
		if _, ok := s.PoolOf(*platform); !ok {
			return fmt.Errorf("--platform=%s: the fleet runs %s", *platform, s.Platform)
		}
	} else if len(s.Pools) == 0 {
		*platform = s.Platform
	}
	if *platform == devfleet.PlatformBuildkite {
		return buildkiteJobs(ctx, s, *count, splitList(*labels), *repo, *wait, *timeout, out)
	}
	if *labels == "" {
		*labels = strings.Join(devfleet.DefaultLabels, ",")
	}
	created, err := devfleet.CreateJobs(ctx, s, devfleet.JobRequest{Count: *count, Labels: splitList(*labels), Repository: *repo, Platform: *platform})
	if err != nil {
		return err
	}
	ids := make(map[int64]bool, len(created))
	for _, j := range created {
		ids[j.ID] = true
	}
	where := created[0].Repository
	if where == "" {
		where = s.GitHub.Repository
	}
	if *platform == devfleet.PlatformGitLab {
		fmt.Fprintf(out, "queued %d jobs in %s with tags [%s] (IDs %d..%d); the fake GitLab sends their Job Hooks to %s\n",
			len(created), where, *labels, created[0].ID, created[len(created)-1].ID, s.GitLab.WebhookURL)
	} else {
		fmt.Fprintf(out, "queued %d jobs in %s with runs-on [%s] (IDs %d..%d); the fake GitHub sends their webhooks to %s\n",
			len(created), where, *labels, created[0].ID, created[len(created)-1].ID, s.Webhook.URL)
	}
	if !*wait {
		fmt.Fprintf(out, "watch: %s --kubeconfig %s get machines,machineclaims -n %s -w\n", s.Kubectl, relative(s.Kubeconfig), s.Namespace)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	last := ""
	for {
		all, err := devfleet.ListJobsOf(ctx, s, *platform)
		if err != nil {
			return err
		}
		var mine []devfleet.Job
		for _, j := range all {
			if ids[j.ID] {
				mine = append(mine, j)
			}
		}
		c := devfleet.CountJobs(mine)
		if line := fmt.Sprintf("queued=%d running=%d done=%d/%d", c.Queued, c.Running, c.Completed, len(created)); line != last {
			fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		if c.Completed == len(created) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobs not done: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// buildkiteJobs schedules one-job builds on the fake Buildkite (pipeline defaults to the fleet's)
// and, with wait, follows them until they finished.
func buildkiteJobs(ctx context.Context, s *devfleet.State, count int, rules []string, pipeline string, wait bool, timeout time.Duration, out io.Writer) error {
	for _, r := range rules {
		if !strings.Contains(r, "=") {
			return fmt.Errorf("--labels %q: Buildkite jobs target agents with key=value rules, e.g. queue=%s", r, s.Buildkite.Queue)
		}
	}
	created, err := devfleet.CreateBuildkiteJobs(ctx, s, devfleet.BuildkiteJobRequest{Count: count, AgentQueryRules: rules, Pipeline: pipeline})
	if err != nil {
		return err
	}
	ids := make(map[string]bool, len(created))
	for _, j := range created {
		ids[j.ID] = true
	}
	fmt.Fprintf(out, "scheduled %d jobs in pipeline %s with agent query rules [%s]; the fake Buildkite sends their signed webhooks to %s\n",
		len(created), created[0].Pipeline, strings.Join(created[0].AgentQueryRules, ","), s.Buildkite.WebhookURL)
	if !wait {
		fmt.Fprintf(out, "watch: %s --kubeconfig %s get machines,machineclaims -n %s -w\n", s.Kubectl, relative(s.Kubeconfig), s.Namespace)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		all, err := devfleet.ListBuildkiteJobs(ctx, s)
		if err != nil {
			return err
		}
		var mine []devfleet.BuildkiteJob
		for _, j := range all {
			if ids[j.ID] {
				mine = append(mine, j)
			}
		}
		c := devfleet.CountBuildkiteJobs(mine)
		if line := fmt.Sprintf("scheduled=%d running=%d done=%d/%d", c.Queued, c.Running, c.Completed, len(created)); line != last {
			fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		if c.Completed == len(created) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobs not done: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func status(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	stateDir := fs.String("state-dir", defaultStateDir(), "the running fleet's state directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := devfleet.ReadState(*stateDir)
	if err != nil {
		return err
	}
	c, err := devfleet.ClientFor(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sum, err := devfleet.Summarize(ctx, c, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "RunnerPool %s/%s (fleet process %d, up since %s)\n", s.Namespace, s.Pool, s.PID, s.StartedAt.Local().Format(time.Kitchen))
	sum.Print(out)
	if s.Console != nil {
		fmt.Fprintf(out, "Console %s (sign in as %s / %s)\n", s.Console.URL, s.Console.Username, s.Console.Password)
	}
	return nil
}
