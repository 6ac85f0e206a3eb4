package fakegitlab

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// jobJSONLocked is the job entity of the jobs API.
func (s *Server) jobJSONLocked(j *Job) map[string]any {
	p := s.projects[j.ProjectID]
	var runner any
	if run := s.runners[j.RunnerID]; run != nil {
		runner = s.runnerJSONLocked(run)
	}
	var duration any
	if !j.StartedAt.IsZero() {
		end := j.FinishedAt
		if end.IsZero() {
			end = s.now()
		}
		duration = end.Sub(j.StartedAt).Seconds()
	}
	return map[string]any{
		"id": j.ID, "status": string(j.Status), "stage": j.Stage, "name": j.Name, "ref": j.Ref, "tag": j.Tag,
		"coverage": nil, "allow_failure": false, "created_at": timeJSON(j.CreatedAt), "started_at": timeJSON(j.StartedAt),
		"finished_at": timeJSON(j.FinishedAt), "erased_at": nil, "duration": duration, "queued_duration": nil,
		"user":   map[string]any{"id": 1, "username": "root", "name": "Administrator"},
		"commit": map[string]any{"id": j.SHA, "short_id": j.SHA[:8], "title": "Update .gitlab-ci.yml"},
		"pipeline": map[string]any{"id": j.PipelineID, "project_id": j.ProjectID, "ref": j.Ref, "sha": j.SHA,
			"status": string(j.Status)},
		"failure_reason": j.FailureReason,
		"web_url":        s.URL() + "/" + p.PathWithNamespace + "/-/jobs/" + strconv.FormatInt(j.ID, 10),
		"project":        map[string]any{"ci_job_token_scope_enabled": false},
		"artifacts":      []any{},
		"runner":         runner,
		"tag_list":       nonNil(j.Tags),
	}
}

// listProjectJobs lists a project's jobs, newest first, filtered by scope[] (statuses).
func (s *Server) listProjectJobs(w http.ResponseWriter, r *http.Request, _ accessToken) {
	q := r.URL.Query()
	scopes := append(q["scope[]"], q["scope"]...)
	for _, sc := range scopes {
		if !validStatus(JobStatus(sc)) {
			writeBadRequest(w, "scope[0] does not have a valid value")
			return
		}
	}
	s.mu.Lock()
	p := s.projectLocked(r.PathValue("id"))
	if p == nil {
		s.mu.Unlock()
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	var jobs []*Job
	for _, j := range s.jobs {
		if j.ProjectID == p.ID && (len(scopes) == 0 || slices.Contains(scopes, string(j.Status))) {
			jobs = append(jobs, j)
		}
	}
	slices.SortFunc(jobs, func(a, b *Job) int { return int(b.ID - a.ID) })
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(jobs))
	if !ok {
		return
	}
	s.mu.Lock()
	out := make([]map[string]any, 0, end-start)
	for _, j := range jobs[start:end] {
		out = append(out, s.jobJSONLocked(j))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func validStatus(st JobStatus) bool {
	switch st {
	case JobCreated, JobWaitingForResource, JobPreparing, JobPending, JobRunning, JobSuccess, JobFailed,
		JobCanceled, JobSkipped, JobManual, JobScheduled:
		return true
	}
	return false
}

func (s *Server) getProjectJob(w http.ResponseWriter, r *http.Request, _ accessToken) {
	id, ok := pathID(w, r, "job_id", "job")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectLocked(r.PathValue("id"))
	if p == nil {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	j := s.jobs[id]
	if j == nil || j.ProjectID != p.ID {
		writeMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, s.jobJSONLocked(j))
}

func (s *Server) listProtectedRefs(tags bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ accessToken) {
		s.mu.Lock()
		p := s.projectLocked(r.PathValue("id"))
		var names []string
		if p != nil {
			names = p.ProtectedBranches
			if tags {
				names = p.ProtectedTags
			}
			names = slices.Clone(names)
		}
		s.mu.Unlock()
		if p == nil {
			writeMessage(w, http.StatusNotFound, "404 Project Not Found")
			return
		}
		start, end, ok := s.paginate(w, r, len(names))
		if !ok {
			return
		}
		out := []map[string]any{}
		for i, n := range names[start:end] {
			out = append(out, map[string]any{"id": start + i + 1, "name": n})
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func containsAll(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// nonNil renders an empty list as [] rather than null, as GitLab does.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// projectJSONLocked is the project entity of the projects API.
func (s *Server) projectJSONLocked(p *Project) map[string]any {
	name := p.PathWithNamespace[strings.LastIndex(p.PathWithNamespace, "/")+1:]
	ns := s.groups[p.GroupID]
	return map[string]any{
		"id": p.ID, "name": name, "path": name, "path_with_namespace": p.PathWithNamespace,
		"name_with_namespace": strings.ReplaceAll(p.PathWithNamespace, "/", " / "), "default_branch": "main",
		"web_url":   s.URL() + "/" + p.PathWithNamespace,
		"namespace": map[string]any{"id": ns.ID, "full_path": ns.FullPath, "kind": "group"},
	}
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectLocked(r.PathValue("id"))
	if p == nil {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.projectJSONLocked(p))
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupLocked(r.PathValue("id"))
	if g == nil {
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	name := g.FullPath[strings.LastIndex(g.FullPath, "/")+1:]
	var parent any
	if g.ParentID != 0 {
		parent = g.ParentID
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": g.ID, "name": name, "path": name, "full_path": g.FullPath,
		"full_name": strings.ReplaceAll(g.FullPath, "/", " / "), "parent_id": parent, "visibility": "private",
		"web_url": s.URL() + "/groups/" + g.FullPath})
}

// listRunnerJobs lists the jobs a runner has had, filtered by status.
func (s *Server) listRunnerJobs(w http.ResponseWriter, r *http.Request, _ accessToken) {
	id, ok := pathID(w, r, "id", "id")
	if !ok {
		return
	}
	status := r.URL.Query().Get("status")
	s.mu.Lock()
	if s.runners[id] == nil {
		s.mu.Unlock()
		writeMessage(w, http.StatusNotFound, "404 Runner Not Found")
		return
	}
	var jobs []*Job
	for _, j := range s.jobs {
		if j.RunnerID == id && (status == "" || string(j.Status) == status) {
			jobs = append(jobs, j)
		}
	}
	slices.SortFunc(jobs, func(a, b *Job) int { return int(b.ID - a.ID) })
	out := make([]map[string]any, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.jobJSONLocked(j))
	}
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(out))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, out[start:end])
}
