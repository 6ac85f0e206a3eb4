package fakegitlab

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// jobRequest is the body gitlab-runner POSTs to /jobs/request.
type jobRequest struct {
	Token      string         `json:"token"`
	LastUpdate string         `json:"last_update"`
	Info       map[string]any `json:"info"`
}

// requestJob hands the oldest pending job the runner may pick to it (201) and marks it
// running, as GitLab's job queue does; with nothing to pick it answers 204. An unknown runner
// token is 403.
func (s *Server) requestJob(w http.ResponseWriter, r *http.Request) {
	var req jobRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeBadRequest(w, "token is missing")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runnerByTokenLocked(req.Token)
	if run == nil {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	run.ContactedAt = s.now()
	w.Header().Set("X-GitLab-Last-Update", randomHex(8))
	ids := make([]int64, 0, len(s.jobs))
	for id := range s.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := s.jobs[id]
		if !s.canPickLocked(run, j) {
			continue
		}
		j.RunnerID, j.RunnerDescription = run.ID, run.Description
		j.Token = "glcbt-" + randomHex(10)
		j.Acquisitions++
		run.JobsRun++
		s.setStatusLocked(j, JobRunning)
		writeJSON(w, http.StatusCreated, s.runnerJobJSONLocked(j))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// runnerJobJSONLocked is the job payload gitlab-runner receives.
func (s *Server) runnerJobJSONLocked(j *Job) map[string]any {
	p := s.projects[j.ProjectID]
	refType := "branch"
	if j.Tag {
		refType = "tag"
	}
	vars := []map[string]any{}
	for k, v := range map[string]string{
		"CI_JOB_ID": strconv.FormatInt(j.ID, 10), "CI_JOB_NAME": j.Name, "CI_PROJECT_PATH": p.PathWithNamespace,
		"CI_PROJECT_ID": strconv.FormatInt(p.ID, 10), "CI_COMMIT_REF_NAME": j.Ref, "CI_SERVER_URL": s.URL(),
		"CI_COMMIT_REF_PROTECTED": strconv.FormatBool(j.Protected), "CI_PIPELINE_ID": strconv.FormatInt(j.PipelineID, 10),
	} {
		vars = append(vars, map[string]any{"key": k, "value": v, "public": true, "masked": false})
	}
	slices.SortFunc(vars, func(a, b map[string]any) int { return strings.Compare(a["key"].(string), b["key"].(string)) })
	return map[string]any{
		"id": j.ID, "token": j.Token, "allow_git_fetch": true,
		"job_info": map[string]any{"id": j.ID, "name": j.Name, "stage": j.Stage, "project_id": p.ID,
			"project_name":          p.PathWithNamespace[strings.LastIndex(p.PathWithNamespace, "/")+1:],
			"time_in_queue_seconds": s.now().Sub(j.CreatedAt).Seconds()},
		"git_info": map[string]any{"repo_url": s.URL() + "/" + p.PathWithNamespace + ".git", "ref": j.Ref, "sha": j.SHA,
			"before_sha": strings.Repeat("0", 40), "ref_type": refType, "refspecs": []string{}, "depth": 20},
		"runner_info": map[string]any{"timeout": 3600, "runner_session_url": nil},
		"variables":   vars,
		"steps": []map[string]any{{"name": "script", "script": []string{"echo " + j.Name}, "timeout": 3600,
			"when": "on_success", "allow_failure": false}},
		"image": nil, "services": []any{}, "artifacts": nil, "cache": []any{}, "credentials": []any{},
		"dependencies": []any{}, "features": map[string]any{"trace_sections": true},
	}
}

// jobUpdate is the body of PUT /jobs/:id.
type jobUpdate struct {
	Token         string `json:"token"`
	State         string `json:"state"`
	FailureReason string `json:"failure_reason"`
	ExitCode      *int   `json:"exit_code"`
}

// updateJob is a runner reporting a job's state with the job token: running (a keep-alive),
// success or failed. A wrong token, or a job no longer running, is 403 with Job-Status.
func (s *Server) updateJob(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id", "id")
	if !ok {
		return
	}
	var req jobUpdate
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeBadRequest(w, "token is missing")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		writeMessage(w, http.StatusNotFound, "404 Not Found")
		return
	}
	if j.Token == "" || req.Token != j.Token {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	w.Header().Set("Job-Status", string(j.Status))
	if j.Status != JobRunning {
		writeMessage(w, http.StatusForbidden, "403 Forbidden  - Job is not running")
		return
	}
	switch req.State {
	case "", "running":
	case "success":
		s.setStatusLocked(j, JobSuccess)
	case "failed":
		j.FailureReason = req.FailureReason
		if j.FailureReason == "" {
			j.FailureReason = "script_failure"
		}
		s.setStatusLocked(j, JobFailed)
	default:
		writeBadRequest(w, "state does not have a valid value")
		return
	}
	if run := s.runners[j.RunnerID]; run != nil {
		run.ContactedAt = s.now()
	}
	w.Header().Set("Job-Status", string(j.Status))
	w.WriteHeader(http.StatusOK)
}
