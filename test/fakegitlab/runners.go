package fakegitlab

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// createRunnerRequest is POST /user/runners, sent as JSON or as a form.
type createRunnerRequest struct {
	RunnerType     string  `json:"runner_type"`
	GroupID        *int64  `json:"group_id"`
	ProjectID      *int64  `json:"project_id"`
	Description    string  `json:"description"`
	Paused         bool    `json:"paused"`
	Locked         bool    `json:"locked"`
	RunUntagged    *bool   `json:"run_untagged"`
	TagList        tagList `json:"tag_list"`
	AccessLevel    string  `json:"access_level"`
	MaximumTimeout int64   `json:"maximum_timeout"`
}

// tagList is tag_list, which GitLab takes as an array or as one comma-separated string, and
// whose array items are split at commas too (docs.gitlab.com/api/users/#create-a-runner-linked-to-a-user).
type tagList []string

func (t *tagList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = splitTags(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*t = nil
	for _, v := range many {
		*t = append(*t, splitTags(v)...)
	}
	return nil
}

// splitTags splits a comma-separated tag list, dropping blanks.
func splitTags(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
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
				return req, invalidParam(field.name)
			}
			*field.dst = &n
		}
	}
	for _, field := range []struct {
		name string
		dst  *bool
	}{{"paused", &req.Paused}, {"locked", &req.Locked}} {
		if v := f.Get(field.name); v != "" {
			b, ok := grapeBool(v)
			if !ok {
				return req, invalidParam(field.name)
			}
			*field.dst = b
		}
	}
	if v := f.Get("run_untagged"); v != "" {
		b, ok := grapeBool(v)
		if !ok {
			return req, invalidParam("run_untagged")
		}
		req.RunUntagged = &b
	}
	for _, v := range append(f["tag_list"], f["tag_list[]"]...) {
		req.TagList = append(req.TagList, splitTags(v)...)
	}
	return req, nil
}

func (s *Server) createRunner(w http.ResponseWriter, r *http.Request, tok accessToken) {
	req, err := decodeCreateRunner(r)
	var invalid invalidParam
	if errors.As(err, &invalid) {
		writeBadRequest(w, invalid.Error())
		return
	}
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
		AccessLevel: req.AccessLevel, Paused: req.Paused, Locked: req.Locked, CreatedAt: s.now()}
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
	id, ok := pathID(w, r, "id", "id")
	if !ok {
		return
	}
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
	token := runnerToken(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runnerByTokenLocked(token)
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
		"online": run.Online(now), "status": run.Status(now), "created_at": timeJSON(run.CreatedAt),
	}
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request, _ accessToken) {
	id, ok := pathID(w, r, "id", "id")
	if !ok {
		return
	}
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

// verifyRunner is POST /runners/verify, which gitlab-runner calls when it registers with a
// runner authentication token: 200 with the runner's ID and token, 403 for an unknown token
// (docs.gitlab.com/api/runners/#verify-authentication-for-a-registered-runner).
func (s *Server) verifyRunner(w http.ResponseWriter, r *http.Request) {
	token := runnerToken(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runnerByTokenLocked(token)
	if run == nil {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": run.ID, "token": run.Token, "token_expires_at": timeJSON(run.TokenExpiresAt)})
}

// runnerToken is the token field of a runner endpoint's JSON or form body.
func runnerToken(r *http.Request) string {
	var body struct {
		Token string `json:"token"`
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16)).Decode(&body)
	} else if err := r.ParseForm(); err == nil {
		body.Token = r.Form.Get("token")
	}
	return body.Token
}

// pathID reads a numeric path parameter; GitLab answers 400 "<name> is invalid" for one that
// is not a number.
func pathID(w http.ResponseWriter, r *http.Request, name, param string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(param), 10, 64)
	if err != nil {
		writeBadRequest(w, name+" is invalid")
		return 0, false
	}
	return id, true
}
