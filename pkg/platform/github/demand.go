package github

import (
	"context"
	"errors"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// runStatusesWithQueuedJobs are the workflow-run statuses whose runs can hold a job waiting for
// a runner: a queued run, a run held by a deployment protection rule, and a running run whose
// later jobs (needs:, matrix) are still queued.
var runStatusesWithQueuedJobs = []string{"queued", "waiting", "in_progress"}

// QueuedJobs lists the jobs in scope that wait for a runner. GitHub has no "queued jobs" query,
// so per repository it lists runs by status (GET /repos/{o}/{r}/actions/runs?status=..., one
// call per status in runStatusesWithQueuedJobs) and then each run's jobs (GET
// .../runs/{id}/jobs) keeping queued and waiting ones. An organization scope covers the
// installation's repositories of that organization (GET /installation/repositories). The cost
// is 3 + one call per active run per repository, so the repair loop should run minutes apart.
// Once the installation's budget is down to its reserve (RepairReserveShare) the listing stops
// with platform.ErrBudgetReserved and the budget's reset time, before it is refused.
func (c *Client) QueuedJobs(ctx context.Context, scope platform.Scope) ([]platform.Job, error) {
	return c.activeJobs(ctx, scope, false, true)
}

// ActiveJobs is QueuedJobs with the jobs in progress too (their RunnerName says on which
// runner), at no extra cost: a poll without webhooks learns from them which runners are busy.
// It keeps no reserve: a pool without webhooks learns of demand only this way, and the poller
// stops on its own at LowBudget.
func (c *Client) ActiveJobs(ctx context.Context, scope platform.Scope) ([]platform.Job, error) {
	return c.activeJobs(ctx, scope, true, false)
}

// activeJobs lists the jobs waiting (and, with running, in progress); with keepReserve it stops
// once the installation's budget is down to its reserve.
func (c *Client) activeJobs(ctx context.Context, scope platform.Scope, running, keepReserve bool) ([]platform.Job, error) {
	scope = scope.Effective()
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return nil, err
	}
	id, err := c.installationFor(ctx, scope)
	if err != nil {
		return nil, err
	}
	var b *budget
	if keepReserve {
		b = c.budgetOf(id)
	}
	repos := []string{scope.Repository}
	if !scope.IsRepository() {
		if repos, err = c.installationRepos(ctx, client, scope.Organization); err != nil {
			c.forgetInstallation(scope, err)
			return nil, err
		}
	}
	var out []platform.Job
	for _, repo := range repos {
		jobs, err := c.queuedJobsInRepo(ctx, client, b, repo, running)
		if err != nil {
			c.forgetInstallation(scope, err)
			return nil, err
		}
		out = append(out, jobs...)
	}
	return out, nil
}

func (c *Client) installationRepos(ctx context.Context, client *gh.Client, org string) ([]string, error) {
	opts := &gh.ListOptions{PerPage: 100}
	var out []string
	for {
		page, resp, err := client.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, classify("list installation repositories", resp, err)
		}
		for _, r := range page.Repositories {
			if strings.EqualFold(r.GetOwner().GetLogin(), org) {
				out = append(out, r.GetFullName())
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func (c *Client) queuedJobsInRepo(ctx context.Context, client *gh.Client, b *budget, repo string, running bool) ([]platform.Job, error) {
	owner, name, _ := strings.Cut(repo, "/")
	spare := func(op string) error {
		if b == nil {
			return nil
		}
		if low, reset, why := b.reserved(); low {
			return &platform.Error{Class: platform.ErrBudgetReserved, Op: op, RetryAt: reset, Err: errors.New(why)}
		}
		return nil
	}
	seen := map[int64]bool{}
	var runIDs []int64
	for _, status := range runStatusesWithQueuedJobs {
		opts := &gh.ListWorkflowRunsOptions{Status: status, ListOptions: gh.ListOptions{PerPage: 100}}
		for {
			if err := spare("list " + status + " workflow runs in " + repo); err != nil {
				return nil, err
			}
			runs, resp, err := client.Actions.ListRepositoryWorkflowRuns(ctx, owner, name, opts)
			if err != nil {
				return nil, classify("list "+status+" workflow runs in "+repo, resp, err)
			}
			for _, run := range runs.WorkflowRuns {
				if !seen[run.GetID()] {
					seen[run.GetID()] = true
					runIDs = append(runIDs, run.GetID())
				}
			}
			if resp.NextPage == 0 {
				break
			}
			opts.Page = resp.NextPage
		}
	}
	var out []platform.Job
	for _, runID := range runIDs {
		opts := &gh.ListWorkflowJobsOptions{Filter: "latest", ListOptions: gh.ListOptions{PerPage: 100}}
		for {
			if err := spare("list jobs of run in " + repo); err != nil {
				return nil, err
			}
			jobs, resp, err := client.Actions.ListWorkflowJobs(ctx, owner, name, runID, opts)
			if err != nil {
				return nil, classify("list jobs of run in "+repo, resp, err)
			}
			for _, j := range jobs.Jobs {
				if state := platform.JobState(j.GetStatus()); state == platform.JobQueued || state == platform.JobWaiting || (running && state == platform.JobInProgress) {
					out = append(out, toJob(j, repo))
				}
			}
			if resp.NextPage == 0 {
				break
			}
			opts.Page = resp.NextPage
		}
	}
	return out, nil
}

func toJob(j *gh.WorkflowJob, repo string) platform.Job {
	return platform.Job{
		ID: formatID(j.GetID()), RunID: formatID(j.GetRunID()), Name: j.GetName(), State: platform.JobState(j.GetStatus()),
		Labels: platform.NormalizeLabels(j.Labels), Repository: repo, RunnerName: j.GetRunnerName(),
		CreatedAt: j.GetCreatedAt().Time,
	}
}

// GetJob reads one job of a repository scope, to check a job's state during repair.
func (c *Client) GetJob(ctx context.Context, scope platform.Scope, jobID string) (platform.Job, error) {
	scope = scope.Effective()
	id, err := parseID("job ID", jobID)
	if err != nil {
		return platform.Job{}, err
	}
	if !scope.IsRepository() {
		return platform.Job{}, &platform.Error{Class: platform.ErrInvalid, Op: "get job", Err: errNeedRepository}
	}
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return platform.Job{}, err
	}
	owner, name := scope.RepositoryParts()
	j, resp, err := client.Actions.GetWorkflowJobByID(ctx, owner, name, id)
	if err != nil {
		err = classify("get job in "+scope.String(), resp, err)
		c.forgetInstallation(scope, err)
		return platform.Job{}, err
	}
	return toJob(j, scope.Repository), nil
}
