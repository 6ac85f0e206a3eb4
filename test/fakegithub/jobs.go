package fakegithub

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

type workflowRun struct {
	ID         int64
	Repository string
	Name       string
	CreatedAt  time.Time
	JobIDs     []int64
}

type jobOptions struct {
	name, workflow string
	runID          int64
	noQueuedHook   bool
}

// JobOption adjusts a job made by CreateJob.
type JobOption func(*jobOptions)

// WithJobName names the job (default "build").
func WithJobName(name string) JobOption { return func(o *jobOptions) { o.name = name } }

// WithWorkflowName names the job's workflow and run (default "CI").
func WithWorkflowName(name string) JobOption { return func(o *jobOptions) { o.workflow = name } }

// InRun adds the job to an existing run (as a matrix does) instead of starting a new run.
func InRun(runID int64) JobOption { return func(o *jobOptions) { o.runID = runID } }

// WithoutQueuedWebhook skips the queued delivery, as when GitHub drops a webhook: only
// reconciling against the API can find the job.
func WithoutQueuedWebhook() JobOption { return func(o *jobOptions) { o.noQueuedHook = true } }

// DeliverJobWebhook sends the webhook of a job's current state again (a late or redelivered
// delivery), e.g. after WithoutQueuedWebhook.
func (s *Server) DeliverJobWebhook(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("fakegithub: no job %d", id)
	}
	s.enqueueJobHookLocked(string(j.Status), j)
	return nil
}

// CreateJob queues a workflow job in repo ("owner/name") whose runs-on labels are labels, and
// sends the queued webhook when one is configured. A malformed repo panics: it is a test bug.
func (s *Server) CreateJob(repo string, labels []string, opts ...JobOption) Job {
	if _, _, ok := splitRepo(repo); !ok {
		panic(fmt.Sprintf("fakegithub: repository %q is not owner/name", repo))
	}
	o := jobOptions{name: "build", workflow: "CI"}
	for _, opt := range opts {
		opt(&o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo = s.addRepoLocked(repo)
	run, ok := s.runs[o.runID]
	if !ok || !sameScope(run.Repository, repo) {
		run = &workflowRun{ID: s.newID("run"), Repository: repo, Name: o.workflow, CreatedAt: s.now()}
		s.runs[run.ID] = run
	}
	j := &Job{
		ID: s.newID("job"), RunID: run.ID, Repository: repo, Name: o.name, WorkflowName: run.Name,
		Labels: append([]string(nil), labels...), Status: JobQueued, CreatedAt: s.now(),
	}
	s.jobs[j.ID] = j
	run.JobIDs = append(run.JobIDs, j.ID)
	if !o.noQueuedHook {
		s.enqueueJobHookLocked("queued", j)
	}
	return cloneJob(j)
}

// CancelJob cancels a queued job (completed/cancelled, never run), as a user cancelling a run.
func (s *Server) CancelJob(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("job %d not found", id)
	}
	if j.Status != JobQueued {
		return fmt.Errorf("job %d is %s, not queued", id, j.Status)
	}
	j.Status, j.Conclusion, j.CompletedAt = JobCompleted, "cancelled", s.now()
	s.enqueueJobHookLocked("completed", j)
	return nil
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nilIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func (s *Server) jobJSONLocked(j *Job) map[string]any {
	base := fmt.Sprintf("%s/repos/%s/actions", s.URL(), j.Repository)
	m := map[string]any{
		"id": j.ID, "run_id": j.RunID, "run_attempt": 1, "name": j.Name, "workflow_name": j.WorkflowName,
		"run_url": fmt.Sprintf("%s/runs/%d", base, j.RunID), "url": fmt.Sprintf("%s/jobs/%d", base, j.ID),
		"html_url":    fmt.Sprintf("https://github.com/%s/actions/runs/%d/job/%d", j.Repository, j.RunID, j.ID),
		"head_branch": "main", "head_sha": "0000000000000000000000000000000000000000",
		"status": j.Status, "conclusion": nilIfEmpty(j.Conclusion), "labels": j.Labels, "steps": []any{},
		"created_at": timeOrNil(j.CreatedAt), "started_at": timeOrNil(j.StartedAt), "completed_at": timeOrNil(j.CompletedAt),
		"runner_id": nil, "runner_name": nil, "runner_group_id": nil, "runner_group_name": nil,
	}
	if j.RunnerID != 0 {
		m["runner_id"], m["runner_name"] = j.RunnerID, j.RunnerName
		m["runner_group_id"], m["runner_group_name"] = 1, "Default"
	}
	return m
}

// runStatusLocked derives a run's status from its jobs as GitHub does.
func (s *Server) runStatusLocked(run *workflowRun) (status, conclusion string) {
	queued, completed := 0, 0
	conclusion = "success"
	for _, id := range run.JobIDs {
		j := s.jobs[id]
		switch j.Status {
		case JobQueued:
			queued++
		case JobCompleted:
			completed++
			if j.Conclusion != "success" {
				conclusion = j.Conclusion
			}
		}
	}
	switch {
	case completed == len(run.JobIDs):
		return JobCompleted, conclusion
	case queued == len(run.JobIDs):
		return JobQueued, ""
	default:
		return JobInProgress, ""
	}
}

func (s *Server) runJSONLocked(run *workflowRun) map[string]any {
	status, conclusion := s.runStatusLocked(run)
	base := fmt.Sprintf("%s/repos/%s/actions/runs/%d", s.URL(), run.Repository, run.ID)
	return map[string]any{
		"id": run.ID, "name": run.Name, "run_number": run.ID, "run_attempt": 1, "event": "push",
		"head_branch": "main", "status": status, "conclusion": nilIfEmpty(conclusion),
		"url": base, "jobs_url": base + "/jobs", "html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", run.Repository, run.ID),
		"created_at": timeOrNil(run.CreatedAt), "updated_at": timeOrNil(s.now()), "repository": repoJSON(run.Repository),
	}
}

func (s *Server) getWorkflowJob(w http.ResponseWriter, r *http.Request, installationID int64) {
	repo := scopeFromPath(r)
	if s.denyUnlessAccess(w, installationID, repo) {
		return
	}
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok || !sameScope(j.Repository, repo) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.jobJSONLocked(j))
}

// listWorkflowRuns serves runs newest first; ?status= filters by status or conclusion.
func (s *Server) listWorkflowRuns(w http.ResponseWriter, r *http.Request, installationID int64) {
	repo := scopeFromPath(r)
	if s.denyUnlessAccess(w, installationID, repo) {
		return
	}
	want := r.URL.Query().Get("status")
	s.mu.Lock()
	defer s.mu.Unlock()
	var runs []*workflowRun
	for _, run := range s.runs {
		status, conclusion := s.runStatusLocked(run)
		if sameScope(run.Repository, repo) && (want == "" || want == status || want == conclusion) {
			runs = append(runs, run)
		}
	}
	sort.Slice(runs, func(i, k int) bool { return runs[i].ID > runs[k].ID })
	start, end := s.page(w, r, len(runs))
	out := make([]map[string]any, 0, end-start)
	for _, run := range runs[start:end] {
		out = append(out, s.runJSONLocked(run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "workflow_runs": out})
}

func (s *Server) listWorkflowRunJobs(w http.ResponseWriter, r *http.Request, installationID int64) {
	repo := scopeFromPath(r)
	if s.denyUnlessAccess(w, installationID, repo) {
		return
	}
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run, ok := s.runs[id]
	if !ok || !sameScope(run.Repository, repo) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	start, end := s.page(w, r, len(run.JobIDs))
	out := make([]map[string]any, 0, end-start)
	for _, jid := range run.JobIDs[start:end] {
		out = append(out, s.jobJSONLocked(s.jobs[jid]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(run.JobIDs), "jobs": out})
}

// webhookPayloadLocked renders a workflow_job event as GitHub sends it.
func (s *Server) webhookPayloadLocked(action string, j *Job) map[string]any {
	owner := scopeOwner(j.Repository)
	repo := repoJSON(j.Repository)
	payload := map[string]any{
		"action": action, "workflow_job": s.jobJSONLocked(j), "repository": repo,
		"organization": map[string]any{"login": owner},
		"sender":       map[string]any{"login": "octocat", "type": "User"},
	}
	if inst, ok := s.installations[strings.ToLower(owner)]; ok {
		payload["installation"] = map[string]any{"id": inst.ID}
	}
	return payload
}
