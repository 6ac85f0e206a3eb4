package gitlab

import (
	"context"
	"errors"
	"strconv"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// maxPages bounds every listing, so a huge group costs a bounded number of requests.
const maxPages = 20

// Job is a job as GitLab's jobs API reports it.
type Job struct {
	ID          int64
	PipelineID  int64
	ProjectID   int64
	ProjectPath string
	Name        string
	Status      string
	Phase       Phase
	// Tags are the job's tags (tag_list), as GitLab matches them against runners.
	Tags []string
	Ref  string
	Tag  bool // the ref is a tag
	// RunnerID and RunnerDescription name the runner that has the job, if any.
	RunnerID          int64
	RunnerDescription string
	CreatedAt         time.Time
}

func jobOf(j *gl.Job, projectPath string) (Job, bool) {
	phase, ok := PhaseOf(j.Status)
	if !ok {
		return Job{}, false
	}
	out := Job{ID: j.ID, PipelineID: j.Pipeline.ID, ProjectID: j.Pipeline.ProjectID, ProjectPath: projectPath, Name: j.Name,
		Status: j.Status, Phase: phase, Tags: j.TagList, Ref: j.Ref, Tag: j.Tag, RunnerID: j.Runner.ID,
		RunnerDescription: j.Runner.Description}
	if j.CreatedAt != nil {
		out.CreatedAt = *j.CreatedAt
	}
	return out, true
}

// project is a project of a scope: its ID and path.
type project struct {
	id   int64
	path string
}

// Jobs lists the jobs of every project in scope that are pending, running or held (see
// listedStatuses), newest first per project: the repair loop's view of demand. A project scope
// costs a request per page; a group scope one more per page of its projects (subgroups
// included); the instance scope lists every project the token sees, so prefer group pools
// on a large instance. GitLab has no instance-wide pending-jobs endpoint.
func (c *Client) Jobs(ctx context.Context, scope Scope) ([]Job, error) {
	projects, err := c.projects(ctx, scope)
	if err != nil {
		return nil, err
	}
	scopes := make([]gl.BuildStateValue, 0, len(listedStatuses))
	for _, s := range listedStatuses {
		scopes = append(scopes, gl.BuildStateValue(s))
	}
	var out []Job
	for _, p := range projects {
		opt := &gl.ListJobsOptions{ListOptions: gl.ListOptions{PerPage: 100}, Scope: &scopes}
		for range maxPages {
			page, resp, err := c.gl.Jobs.ListProjectJobs(p.id, opt, gl.WithContext(ctx))
			if errors.Is(err, gl.ErrNotFound) && scope.Project == "" {
				break // deleted while we listed, or CI disabled
			}
			if err != nil {
				return nil, classify("list jobs of "+p.path, err)
			}
			for _, j := range page {
				if job, ok := jobOf(j, p.path); ok {
					out = append(out, job)
				}
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
	}
	return out, nil
}

// projects lists the projects of a scope: the one project, a group's projects with its
// subgroups', or every project the token sees.
func (c *Client) projects(ctx context.Context, scope Scope) ([]project, error) {
	switch {
	case scope.Project != "":
		id, err := c.projectID(ctx, scope.Project)
		if err != nil {
			return nil, err
		}
		return []project{{id: id, path: scope.Project}}, nil
	case scope.Group != "":
		var out []project
		opt := &gl.ListGroupProjectsOptions{ListOptions: gl.ListOptions{PerPage: 100}, IncludeSubGroups: gl.Ptr(true),
			Archived: gl.Ptr(false), Simple: gl.Ptr(true)}
		for range maxPages {
			page, resp, err := c.gl.Groups.ListGroupProjects(scope.Group, opt, gl.WithContext(ctx))
			if err != nil {
				return nil, classify("list projects of group "+scope.Group, err)
			}
			for _, p := range page {
				out = append(out, project{id: p.ID, path: p.PathWithNamespace})
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
		return out, nil
	case scope.Instance:
		var out []project
		opt := &gl.ListProjectsOptions{ListOptions: gl.ListOptions{PerPage: 100}, Archived: gl.Ptr(false), Simple: gl.Ptr(true)}
		for range maxPages {
			page, resp, err := c.gl.Projects.ListProjects(opt, gl.WithContext(ctx))
			if err != nil {
				return nil, classify("list projects", err)
			}
			for _, p := range page {
				out = append(out, project{id: p.ID, path: p.PathWithNamespace})
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
		return out, nil
	}
	return nil, &platform.Error{Class: platform.ErrInvalid, Op: "list projects", Err: errors.New("the scope names no project, group or instance")}
}

// GetJob reads one job of a project (its path or numeric ID).
func (c *Client) GetJob(ctx context.Context, projectPath string, jobID int64) (Job, error) {
	j, _, err := c.gl.Jobs.GetJob(projectPath, jobID, gl.WithContext(ctx))
	if err != nil {
		return Job{}, classify("get job "+strconv.FormatInt(jobID, 10)+" of "+projectPath, err)
	}
	job, ok := jobOf(j, projectPath)
	if !ok {
		return Job{}, &platform.Error{Class: platform.ErrInvalid, Op: "get job " + strconv.FormatInt(jobID, 10),
			Err: errors.New("GitLab reports an undocumented status " + strconv.Quote(j.Status))}
	}
	return job, nil
}
