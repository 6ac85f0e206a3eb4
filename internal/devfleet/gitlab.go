package devfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	glplatform "github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// Platforms of Options.Platform: the CI platform the sample pool serves.
const (
	PlatformGitHub = "github"
	PlatformGitLab = "gitlab"
)

// Names of the GitLab sample's objects and its fake GitLab's contents.
const (
	GitLabSecretName   = "gitlab-token"
	GitLabCASecretName = "gitlab-ca"
	// DefaultGitLabProject is the project jobs are created in; the pool serves its group,
	// DefaultOrganization.
	DefaultGitLabProject = DefaultOrganization + "/app"
)

// GitLabState is the fake GitLab, when the sample pool is a GitLab pool.
type GitLabState struct {
	// URL is the instance root (the pool's spec.platform.gitlab.url).
	URL string `json:"url"`
	// Group is the pool's scope; Project where `make jobs` creates jobs.
	Group   string `json:"group"`
	Project string `json:"project"`
	// WebhookURL is where the fake sends Job Hooks (the receiver's /webhooks/gitlab).
	WebhookURL string `json:"webhookURL"`
	// JobsURL lists jobs (GET) and creates one (POST {"project","tags","name"}).
	JobsURL string `json:"jobsURL"`
	// CAFile is the certificate the fake GitLab's HTTPS is signed with (curl --cacert); the pool
	// trusts it through spec.platform.gitlab.caBundleRef.
	CAFile string `json:"caFile"`
}

// startGitLab starts the fake GitLab with the sample's group and project and an access token of
// the least privilege docs/platforms.md asks for.
func (f *Fleet) startGitLab() (token string, err error) {
	log, err := f.fileLogger("fake-gitlab.log")
	if err != nil {
		return "", err
	}
	f.GitLab = fakegitlab.New(fakegitlab.Options{Logger: log, TLS: true})
	if err := f.GitLab.Start("127.0.0.1:0"); err != nil {
		return "", err
	}
	group := f.opts.Pool.Organization
	project := group + "/app"
	if strings.EqualFold(group, DefaultOrganization) {
		project = DefaultGitLabProject
	}
	f.GitLab.AddProject(project)
	caFile := filepath.Join(f.stateDir, "gitlab-ca.crt")
	if err := os.WriteFile(caFile, f.GitLab.CACertPEM(), 0o600); err != nil {
		return "", err
	}
	url := f.GitLab.URL()
	f.State.GitLab = &GitLabState{URL: url, Group: group, Project: project, JobsURL: url + "/_fake/jobs", CAFile: caFile}
	return f.GitLab.AddToken(fakegitlab.ScopeCreateRunner, fakegitlab.ScopeManageRunner, fakegitlab.ScopeReadAPI), nil
}

// createGitLabJobs queues jobs with tags req.Labels in the fake GitLab's project (or
// req.Repository) through its admin endpoint: the fake sends each job's Job Hook to the fleet's
// receiver, and a runner with the tags takes it.
func createGitLabJobs(ctx context.Context, s *State, req JobRequest) ([]Job, error) {
	if req.Repository == "" {
		req.Repository = s.GitLab.Project
	}
	if req.Name == "" {
		req.Name = "job"
	}
	c, err := trustingClient(s.GitLab.CAFile)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, req.Count)
	for i := 1; i <= req.Count; i++ {
		body, _ := json.Marshal(fakegitlab.AdminJobRequest{Project: req.Repository, Tags: req.Labels, Name: fmt.Sprintf("%s-%d", req.Name, i)})
		var j fakegitlab.AdminJob
		if err := call(ctx, c, http.MethodPost, s.GitLab.JobsURL, body, http.StatusCreated, &j); err != nil {
			return jobs, err
		}
		jobs = append(jobs, gitlabJob(j))
	}
	return jobs, nil
}

// listGitLabJobs returns every job the fake GitLab knows, by ID.
func listGitLabJobs(ctx context.Context, s *State) ([]Job, error) {
	c, err := trustingClient(s.GitLab.CAFile)
	if err != nil {
		return nil, err
	}
	var all []fakegitlab.AdminJob
	if err := call(ctx, c, http.MethodGet, s.GitLab.JobsURL, nil, http.StatusOK, &all); err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(all))
	for _, j := range all {
		jobs = append(jobs, gitlabJob(j))
	}
	return jobs, nil
}

// gitlabJob is a GitLab job in the fleet's terms: its status as the GitHub-like status CountJobs
// counts (pending is queued, running in progress, a finished status completed, a held one
// waiting), its conclusion, and its runner's Machine.
func gitlabJob(j fakegitlab.AdminJob) Job {
	out := Job{ID: j.ID, Repository: j.Project, Name: j.Name, Labels: j.Tags, Acquisitions: j.Acquisitions,
		CreatedAt: &j.CreatedAt, StartedAt: j.StartedAt, CompletedAt: j.FinishedAt}
	switch {
	case j.Status == fakegitlab.JobPending:
		out.Status = fakegithub.JobQueued
	case j.Status == fakegitlab.JobRunning:
		out.Status = fakegithub.JobInProgress
	case j.Status.Finished():
		out.Status = fakegithub.JobCompleted
		conclusion := string(j.Status)
		out.Conclusion = &conclusion
	default:
		out.Status = "waiting"
	}
	if name, ok := strings.CutPrefix(j.Runner, glplatform.DescriptionPrefix); ok {
		out.RunnerName = &name
	}
	return out
}
