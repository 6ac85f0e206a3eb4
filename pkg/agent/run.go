package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// jobPollInterval is how often the agent looks for the job-started marker.
const jobPollInterval = 500 * time.Millisecond

// runRunner runs the platform's runner (runnerLaunch) until it exits after its one job.
//
// How the agent knows a job started: the runner creates a worker log for each job it takes (the
// real runner writes _diag/Worker_<timestamp>.log when its worker starts). Until a file matching
// runner.jobStartedGlob appears, the runner is idle; if it is still idle at the idle timeout, the
// agent stops it and the VM powers off. Once a job started, no timeout applies: the job's own
// timeout is the platform's business, and the pool's maxLifetime bounds the VM.
func (a *Agent) runRunner(ctx context.Context, l launch) (Outcome, error) {
	r := a.cfg.Runner
	for path, data := range l.Files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return OutcomeFailed, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	cmd := exec.Command(l.Args[0], l.Args[1:]...)
	cmd.Dir = r.Directory
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), l.Env...)
	if err := setProcessAttributes(cmd, r.User); err != nil {
		return OutcomeFailed, err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return OutcomeFailed, fmt.Errorf("starting %s: %w", r.RunScript, err)
	}
	a.log.Info("runner started", "pid", cmd.Process.Pid, "idleTimeout", r.IdleTimeout.Duration)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	idle := time.NewTimer(r.IdleTimeout.Duration)
	defer idle.Stop()
	poll := time.NewTicker(jobPollInterval)
	defer poll.Stop()
	jobStarted := false
	for {
		select {
		case err := <-exited:
			if jobStarted || a.jobStarted() {
				a.log.Info("runner finished its job", "duration", time.Since(started).Round(time.Second), "exit", exitText(err))
				return OutcomeJobDone, nil
			}
			return OutcomeFailed, fmt.Errorf("runner exited without taking a job: %s", exitText(err))
		case <-poll.C:
			if !jobStarted && a.jobStarted() {
				jobStarted = true
				idle.Stop()
				a.log.Info("job started", "after", time.Since(started).Round(time.Second))
			}
		case <-idle.C:
			if jobStarted || a.jobStarted() {
				jobStarted = true
				continue
			}
			a.log.Info("no job started within the idle timeout; stopping the runner", "idleTimeout", r.IdleTimeout.Duration)
			a.stop(cmd, exited)
			return OutcomeIdle, nil
		case <-ctx.Done():
			a.stop(cmd, exited)
			return OutcomeFailed, ctx.Err()
		}
	}
}

func (a *Agent) jobStarted() bool {
	matches, _ := filepath.Glob(filepath.Join(a.cfg.Runner.Directory, a.cfg.Runner.JobStartedGlob))
	return len(matches) > 0
}

// stop asks the runner's process group to exit, then kills it after the grace period.
func (a *Agent) stop(cmd *exec.Cmd, exited <-chan error) {
	signalGroup(cmd, false)
	select {
	case <-exited:
	case <-time.After(a.opts.StopGrace):
		signalGroup(cmd, true)
		<-exited
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
