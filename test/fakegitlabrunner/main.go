// Command fakegitlabrunner stands in for gitlab-runner in tests and the local fleet. It accepts
// the real CLI's run-single command and flags (and their CI_SERVER_* variables):
//
//	fakegitlabrunner run-single --url https://gitlab.example.com --token glrt-... \
//	    --executor shell --max-builds 1 --wait-timeout 600 [--builds-dir DIR]
//
// It asks test/fakegitlab for a job with the runner authentication token until one comes or
// the wait timeout passes, runs it (GitLab marks it running when it hands it out; the runner
// reports it running, then success, after FAKEGITLABRUNNER_JOB_DURATION if set) and exits.
// Like the shell executor it checks the job out under
// <builds-dir>/<short token>/0/<project path>, which tells a watcher that a job started. TLS
// trust comes from the system roots and, as for the real runner, --tls-ca-file
// (CI_SERVER_TLS_CA_FILE). On SIGTERM or SIGQUIT it stops waiting and exits.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

type options struct {
	url, token, executor, buildsDir, caFile string
	maxBuilds, waitTimeout                  int
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "run-single" {
		fmt.Fprintln(os.Stderr, "usage: fakegitlabrunner run-single --url URL --token T --executor shell --max-builds 1 [--wait-timeout S]")
		os.Exit(2)
	}
	opts, err := parse(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegitlabrunner:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "fakegitlabrunner:", err)
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
	fs := flag.NewFlagSet("run-single", flag.ContinueOnError)
	fs.StringVar(&o.url, "url", env("CI_SERVER_URL", ""), "GitLab instance URL")
	fs.StringVar(&o.token, "token", env("CI_SERVER_TOKEN", ""), "runner authentication token")
	fs.StringVar(&o.executor, "executor", env("RUNNER_EXECUTOR", ""), "executor")
	fs.StringVar(&o.buildsDir, "builds-dir", env("RUNNER_BUILDS_DIR", "builds"), "where job checkouts go")
	fs.StringVar(&o.caFile, "tls-ca-file", env("CI_SERVER_TLS_CA_FILE", ""), "PEM certificates to trust besides the system roots")
	fs.IntVar(&o.maxBuilds, "max-builds", 0, "jobs to run before exiting (0: run forever)")
	fs.IntVar(&o.waitTimeout, "wait-timeout", 0, "seconds to wait for a job before exiting (0: forever)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.url == "":
		return o, errors.New("missing --url")
	case o.token == "":
		return o, errors.New("missing --token")
	case o.executor != "shell":
		return o, fmt.Errorf("executor %q: this fake has only the shell executor", o.executor)
	case o.maxBuilds != 1:
		return o, errors.New("this fake runs one job only: pass --max-builds 1")
	}
	return o, nil
}

func run(ctx context.Context, o options) error {
	c := &fakegitlab.RunnerClient{URL: o.url, Token: o.token}
	if o.caFile != "" {
		hc, err := trusting(o.caFile)
		if err != nil {
			return err
		}
		c.HTTP = hc
	}
	var deadline <-chan time.Time
	if o.waitTimeout > 0 {
		deadline = time.After(time.Duration(o.waitTimeout) * time.Second)
	}
	for {
		job, err := c.RequestJob(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			return err
		case job != nil:
			return runJob(context.WithoutCancel(ctx), c, job, checkoutDir(o, job))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			fmt.Println("wait timeout reached without a job")
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// trusting is a client that trusts the system roots and the certificates of caFile.
func trusting(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca-file %s holds no certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// checkoutDir is where the shell executor checks a job out:
// <builds-dir>/<short token>/<concurrent id>/<namespace>/<project>.
func checkoutDir(o options, job *fakegitlab.RunnerJob) string {
	short := strings.TrimPrefix(o.token, "glrt-")
	short = short[:min(len(short), 8)]
	return filepath.Join(o.buildsDir, short, "0", filepath.FromSlash(job.Variable("CI_PROJECT_PATH")))
}

func runJob(ctx context.Context, c *fakegitlab.RunnerClient, job *fakegitlab.RunnerJob, dir string) error {
	if err := c.UpdateJob(ctx, job, "running"); err != nil {
		return err
	}
	// The checkout directory is the sign, visible from outside, that a job started.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("job %d started: %s\n", job.ID, job.JobInfo.Name)
	if d, err := time.ParseDuration(os.Getenv("FAKEGITLABRUNNER_JOB_DURATION")); err == nil {
		time.Sleep(d)
	}
	if err := c.UpdateJob(ctx, job, "success"); err != nil {
		return err
	}
	fmt.Printf("job %d finished\n", job.ID)
	return nil
}
