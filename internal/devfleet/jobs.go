package devfleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// Job is a workflow job as the fake GitHub's admin endpoint lists it.
type Job struct {
	ID           int64      `json:"id"`
	Repository   string     `json:"repository"`
	Name         string     `json:"name"`
	Labels       []string   `json:"labels"`
	Status       string     `json:"status"`
	Conclusion   *string    `json:"conclusion"`
	RunnerName   *string    `json:"runner_name"`
	Acquisitions int        `json:"acquisitions"`
	CreatedAt    *time.Time `json:"created_at"`
	StartedAt    *time.Time `json:"started_at"`
	CompletedAt  *time.Time `json:"completed_at"`
}

// JobRequest asks for Count jobs with runs-on Labels in Repository (default: the state's).
type JobRequest struct {
	Count      int
	Labels     []string
	Repository string
	// Name prefixes the jobs' names; default "job".
	Name string
	// Platform is where the jobs go, PlatformGitHub or PlatformGitLab (Buildkite's have
	// CreateBuildkiteJobs); default the fleet's only platform, or GitHub in a mixed fleet.
	Platform string
}

// CreateJobs queues jobs in the fake GitHub through its admin endpoint, exactly as a push would
// on github.com: the fake sends each job's signed workflow_job "queued" webhook to the fleet's
// receiver, and a runner that comes online takes it.
func CreateJobs(ctx context.Context, s *State, req JobRequest) ([]Job, error) {
	switch jobPlatform(s, req.Platform) {
	case PlatformGitLab:
		if s.GitLab == nil {
			return nil, fmt.Errorf("the fleet runs %s, not GitLab", s.Platform)
		}
		return createGitLabJobs(ctx, s, req)
	case PlatformBuildkite:
		return nil, errors.New("use CreateBuildkiteJobs for Buildkite jobs")
	}
	if req.Repository == "" {
		req.Repository = s.GitHub.Repository
	}
	if req.Name == "" {
		req.Name = "job"
	}
	if len(req.Labels) == 0 {
		return nil, fmt.Errorf("jobs need runs-on labels")
	}
	c, err := githubClient(s)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, req.Count)
	for i := 1; i <= req.Count; i++ {
		body, _ := json.Marshal(map[string]any{"repository": req.Repository, "labels": req.Labels, "name": fmt.Sprintf("%s-%d", req.Name, i)})
		var j Job
		if err := call(ctx, c, http.MethodPost, s.GitHub.JobsURL, body, http.StatusCreated, &j); err != nil {
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ListJobs returns every job the fake GitHub (a GitLab fleet: the fake GitLab) knows, by ID.
func ListJobs(ctx context.Context, s *State) ([]Job, error) { return ListJobsOf(ctx, s, "") }

// ListJobsOf returns every job of platform (default as JobRequest.Platform), by ID.
func ListJobsOf(ctx context.Context, s *State, platform string) ([]Job, error) {
	if jobPlatform(s, platform) == PlatformGitLab && s.GitLab != nil {
		return listGitLabJobs(ctx, s)
	}
	c, err := githubClient(s)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	return jobs, call(ctx, c, http.MethodGet, s.GitHub.JobsURL, nil, http.StatusOK, &jobs)
}

// ListVMs returns the Proxmox simulator's VMs through its admin endpoint.
func ListVMs(ctx context.Context, s *State) ([]pvesim.VM, error) {
	c, err := simulatorClient(s)
	if err != nil {
		return nil, err
	}
	var vms []pvesim.VM
	return vms, call(ctx, c, http.MethodGet, s.Proxmox.AdminURL+"/vms", nil, http.StatusOK, &vms)
}

func simulatorClient(s *State) (*http.Client, error) { return trustingClient(s.Proxmox.CAFile) }

// githubClient calls the fake GitHub's admin endpoints; a state without a CA file is from a fleet
// whose fake served plain HTTP.
func githubClient(s *State) (*http.Client, error) {
	if s.GitHub.CAFile == "" {
		return &http.Client{Timeout: 10 * time.Second}, nil
	}
	return trustingClient(s.GitHub.CAFile)
}

func trustingClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

func call(ctx context.Context, c *http.Client, method, url string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// JobCounts summarises jobs by state.
type JobCounts struct {
	Queued, Running, Completed, Total int
}

// CountJobs counts jobs by status.
func CountJobs(jobs []Job) JobCounts {
	c := JobCounts{Total: len(jobs)}
	for _, j := range jobs {
		switch j.Status {
		case fakegithub.JobQueued:
			c.Queued++
		case fakegithub.JobInProgress:
			c.Running++
		case fakegithub.JobCompleted:
			c.Completed++
		}
	}
	return c
}

// BuildkiteJob is a job as the fake Buildkite's admin endpoint lists it.
type BuildkiteJob struct {
	ID              string     `json:"id"`
	Pipeline        string     `json:"pipeline"`
	Name            string     `json:"name"`
	State           string     `json:"state"`
	AgentQueryRules []string   `json:"agent_query_rules"`
	Acquisitions    int        `json:"acquisitions"`
	CreatedAt       *time.Time `json:"created_at"`
	StartedAt       *time.Time `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	Agent           *struct {
		Name string `json:"name"`
	} `json:"agent"`
}

// BuildkiteJobRequest asks for Count one-job builds whose jobs target AgentQueryRules (default:
// the pool's queue) in Pipeline (default: the state's).
type BuildkiteJobRequest struct {
	Count           int
	AgentQueryRules []string
	Pipeline        string
	Name            string
}

// CreateBuildkiteJobs schedules builds in the fake Buildkite through its admin endpoint, as a
// push would: the fake sends each job's signed job.scheduled webhook to the fleet's receiver,
// and an agent of the job's queue and tags takes it.
func CreateBuildkiteJobs(ctx context.Context, s *State, req BuildkiteJobRequest) ([]BuildkiteJob, error) {
	bk := s.Buildkite
	if bk == nil {
		return nil, fmt.Errorf("the fleet runs %s, not Buildkite (start it with --platform=buildkite)", s.Platform)
	}
	if req.Pipeline == "" {
		req.Pipeline = bk.Pipeline
	}
	if req.Name == "" {
		req.Name = "job"
	}
	if len(req.AgentQueryRules) == 0 {
		req.AgentQueryRules = []string{"queue=" + bk.Queue}
	}
	c, err := trustingClient(bk.CAFile)
	if err != nil {
		return nil, err
	}
	jobs := make([]BuildkiteJob, 0, req.Count)
	for i := 1; i <= req.Count; i++ {
		body, _ := json.Marshal(map[string]any{"pipeline": req.Pipeline, "agent_query_rules": req.AgentQueryRules, "name": fmt.Sprintf("%s-%d", req.Name, i)})
		var j BuildkiteJob
		if err := call(ctx, c, http.MethodPost, bk.JobsURL, body, http.StatusCreated, &j); err != nil {
			return jobs, err
		}
		j.Pipeline = req.Pipeline
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ListBuildkiteJobs returns every job the fake Buildkite knows, oldest first.
func ListBuildkiteJobs(ctx context.Context, s *State) ([]BuildkiteJob, error) {
	if s.Buildkite == nil {
		return nil, fmt.Errorf("the fleet runs %s, not Buildkite", s.Platform)
	}
	c, err := trustingClient(s.Buildkite.CAFile)
	if err != nil {
		return nil, err
	}
	var jobs []BuildkiteJob
	return jobs, call(ctx, c, http.MethodGet, s.Buildkite.JobsURL, nil, http.StatusOK, &jobs)
}

// CountBuildkiteJobs counts jobs by state, in JobCounts' terms: scheduled (and held) jobs are
// queued, jobs an agent holds are running.
func CountBuildkiteJobs(jobs []BuildkiteJob) JobCounts {
	c := JobCounts{Total: len(jobs)}
	for _, j := range jobs {
		switch j.State {
		case fakebuildkite.JobAssigned, fakebuildkite.JobAccepted, fakebuildkite.JobRunning:
			c.Running++
		case fakebuildkite.JobFinished, fakebuildkite.JobCanceled, fakebuildkite.JobExpired:
			c.Completed++
		default:
			c.Queued++
		}
	}
	return c
}
