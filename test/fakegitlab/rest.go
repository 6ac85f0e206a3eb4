package fakegitlab

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// createRunnerRequest is POST /user/runners, sent as JSON or as a form.
type createRunnerRequest struct {
	RunnerType     string   `json:"runner_type"`
	GroupID        *int64   `json:"group_id"`
	ProjectID      *int64   `json:"project_id"`
	Description    string   `json:"description"`
	Paused         bool     `json:"paused"`
	Locked         bool     `json:"locked"`
	RunUntagged    *bool    `json:"run_untagged"`
	TagList        []string `json:"tag_list"`
	AccessLevel    string   `json:"access_level"`
	MaximumTimeout int64    `json:"maximum_timeout"`
}

func decodeCreateRunner(r *http.Request) (createRunnerRequest, error) {
	var req createRunnerRequest
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&req)
		return req, err
	}
	if err := r.ParseForm(); err != nil {
		return req, err
	}
	f := r.Form
	req.RunnerType, req.Description, req.AccessLevel = f.Get("runner_type"), f.Get("description"), f.Get("access_level")
	for _, field := range []struct {
		name string
		dst  **int64
	}{{"group_id", &req.GroupID}, {"project_id", &req.ProjectID}} {
		if v := f.Get(field.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return req, err
			}
			*field.dst = &n
		}
	}
	if v := f.Get("run_untagged"); v != "" {
		b := v == "true"
		req.RunUntagged = &b
	}
	req.Paused, req.Locked = f.Get("paused") == "true", f.Get("locked") == "true"
	for _, v := range append(f["tag_list"], f["tag_list[]"]...) {
		req.TagList = append(req.TagList, strings.Split(v, ",")...)
	}
	return req, nil
}

func (s *Server) createRunner(w http.ResponseWriter, r *http.Request, tok accessToken) {
	req, err := decodeCreateRunner(r)
	if err != nil {
		writeBadRequest(w, "the request body is invalid")
		return
	}
	switch req.AccessLevel {
	case "":
		req.AccessLevel = AccessNotProtected
	case AccessNotProtected, AccessRefProtected:
	default:
		writeBadRequest(w, "access_level does not have a valid value")
		return
	}
	var tags []string
	for _, t := range req.TagList {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	// GitLab refuses a runner that could run nothing: no tags and not run_untagged.
	runUntagged := req.RunUntagged == nil || *req.RunUntagged
	if len(tags) == 0 && !runUntagged {
		writeBadRequest(w, "Tags list can not be empty when runner is not allowed to pick untagged jobs")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run := &Runner{Type: req.RunnerType, Description: req.Description, Tags: tags, RunUntagged: runUntagged,
		AccessLevel: req.AccessLevel, Paused: req.Paused, Locked: req.Locked}
	switch req.RunnerType {
	case InstanceType:
		if !tok.admin {
			writeMessage(w, http.StatusForbidden, "403 Forbidden")
			return
		}
	case GroupType:
		if req.GroupID == nil {
			writeBadRequest(w, "group_id is missing")
			return
		}
		if s.groups[*req.GroupID] == nil {
			writeMessage(w, http.StatusForbidden, "403 Forbidden")
			return
		}
		run.GroupID = *req.GroupID
	case ProjectType:
		if req.ProjectID == nil {
			writeBadRequest(w, "project_id is missing")
			return
		}
		if s.projects[*req.ProjectID] == nil {
			writeMessage(w, http.StatusForbidden, "403 Forbidden")
			return
		}
		run.ProjectID = *req.ProjectID
	case "":
		writeBadRequest(w, "runner_type is missing, runner_type does not have a valid value")
		return
	default:
		writeBadRequest(w, "runner_type does not have a valid value")
		return
	}
	run.ID = s.newIDLocked()
	run.Token = "glrt-" + randomHex(10)
	s.runners[run.ID] = run
	writeJSON(w, http.StatusCreated, map[string]any{"id": run.ID, "token": run.Token, "token_expires_at": timeJSON(run.TokenExpiresAt)})
}

func (s *Server) deleteRunner(w http.ResponseWriter, r *http.Request, _ accessToken) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runners[id] == nil {
		writeMessage(w, http.StatusNotFound, "404 Runner Not Found")
		return
	}
	delete(s.runners, id)
	w.WriteHeader(http.StatusNoContent)
}

// deleteRunnerByToken is a runner deleting itself with its own authentication token.
func (s *Server) deleteRunnerByToken(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16)).Decode(&body)
	} else if err := r.ParseForm(); err == nil {
		body.Token = r.Form.Get("token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runnerByTokenLocked(body.Token)
	if run == nil {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	delete(s.runners, run.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) runnerByTokenLocked(token string) *Runner {
	if token == "" {
		return nil
	}
	for _, run := range s.runners {
		if run.Token == token {
			return run
		}
	}
	return nil
}

// runnerJSONLocked is the short runner entity of the listings.
func (s *Server) runnerJSONLocked(run *Runner) map[string]any {
	now := s.now()
	return map[string]any{
		"id": run.ID, "description": run.Description, "ip_address": "", "active": !run.Paused, "paused": run.Paused,
		"is_shared": run.Type == InstanceType, "runner_type": run.Type, "name": "gitlab-runner",
		"online": run.Online(now), "status": run.Status(now), "created_at": nil,
	}
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request, _ accessToken) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runners[id]
	if run == nil {
		writeMessage(w, http.StatusNotFound, "404 Runner Not Found")
		return
	}
	out := s.runnerJSONLocked(run)
	out["tag_list"] = nonNil(run.Tags)
	out["run_untagged"] = run.RunUntagged
	out["locked"] = run.Locked
	out["access_level"] = run.AccessLevel
	out["maximum_timeout"] = nil
	out["contacted_at"] = timeJSON(run.ContactedAt)
	out["maintenance_note"] = ""
	writeJSON(w, http.StatusOK, out)
}

// writeRunnersLocked filters runners with the listing's type, status, paused and tag_list
// parameters, sorts them by ID and writes one page.
func (s *Server) writeRunners(w http.ResponseWriter, r *http.Request, keep func(*Runner) bool) {
	q := r.URL.Query()
	s.mu.Lock()
	now := s.now()
	var list []map[string]any
	ids := make([]int64, 0, len(s.runners))
	for id := range s.runners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var tags []string
	if v := q.Get("tag_list"); v != "" {
		tags = strings.Split(v, ",")
	}
	for _, id := range ids {
		run := s.runners[id]
		if !keep(run) {
			continue
		}
		if t := q.Get("type"); t != "" && run.Type != t {
			continue
		}
		if st := q.Get("status"); st != "" && run.Status(now) != st && !(st == "paused" && run.Paused) {
			continue
		}
		if p := q.Get("paused"); p != "" && strconv.FormatBool(run.Paused) != p {
			continue
		}
		if !containsAll(run.Tags, tags) {
			continue
		}
		list = append(list, s.runnerJSONLocked(run))
	}
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(list))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, nonNil(list[start:end]))
}

func (s *Server) listAllRunners(w http.ResponseWriter, r *http.Request, tok accessToken) {
	if !tok.admin {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	s.writeRunners(w, r, func(*Runner) bool { return true })
}

// listGroupRunners lists the runners available to a group: its own and its ancestors' group
// runners and the instance runners.
func (s *Server) listGroupRunners(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	g := s.groupLocked(r.PathValue("id"))
	s.mu.Unlock()
	if g == nil {
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	s.writeRunners(w, r, func(run *Runner) bool {
		return run.Type == InstanceType || (run.Type == GroupType && s.inGroupLocked(run.GroupID, g.ID))
	})
}

// listProjectRunners lists the runners available to a project: its own, its groups' and the
// instance runners.
func (s *Server) listProjectRunners(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	p := s.projectLocked(r.PathValue("id"))
	s.mu.Unlock()
	if p == nil {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	s.writeRunners(w, r, func(run *Runner) bool {
		switch run.Type {
		case InstanceType:
			return true
		case GroupType:
			return s.inGroupLocked(run.GroupID, p.GroupID)
		default:
			return run.ProjectID == p.ID
		}
	})
}

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
	id, _ := strconv.ParseInt(r.PathValue("job"), 10, 64)
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

// listGroupProjects lists a group's projects, with include_subgroups=true those of its
// subgroups too, by ID.
func (s *Server) listGroupProjects(w http.ResponseWriter, r *http.Request, _ accessToken) {
	sub := r.URL.Query().Get("include_subgroups") == "true"
	s.mu.Lock()
	g := s.groupLocked(r.PathValue("id"))
	if g == nil {
		s.mu.Unlock()
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	var list []map[string]any
	ids := make([]int64, 0, len(s.projects))
	for id := range s.projects {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := s.projects[id]
		if p.GroupID == g.ID || (sub && s.inGroupLocked(g.ID, p.GroupID)) {
			list = append(list, s.projectJSONLocked(p))
		}
	}
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(list))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, nonNil(list[start:end]))
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

// listProjects lists every project by ID, as an administrator sees them.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.projects))
	for id := range s.projects {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	list := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		list = append(list, s.projectJSONLocked(s.projects[id]))
	}
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(list))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, list[start:end])
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
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
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
