package fakegithub

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// scopeFromPath returns "owner/name" for /repos/... endpoints and "org" for /orgs/... endpoints.
func scopeFromPath(r *http.Request) string {
	if org := r.PathValue("org"); org != "" {
		return org
	}
	return r.PathValue("owner") + "/" + r.PathValue("repo")
}

func (s *Server) labelsJSON(labels []string) []map[string]any {
	out := make([]map[string]any, 0, len(labels))
	for _, l := range labels {
		key := strings.ToLower(l)
		id, ok := s.labelIDs[key]
		if !ok {
			id = s.newID("label")
			s.labelIDs[key] = id
		}
		out = append(out, map[string]any{"id": id, "name": l, "type": "custom"})
	}
	return out
}

// runnerJSONLocked renders a runner as GitHub does; the caller holds s.mu.
func (s *Server) runnerJSONLocked(rn *Runner) map[string]any {
	return map[string]any{
		"id": rn.ID, "name": rn.Name, "os": "Linux", "status": rn.Status, "busy": rn.Busy,
		"runner_group_id": rn.RunnerGroupID, "labels": s.labelsJSON(rn.Labels),
	}
}

func (s *Server) findRunnerByNameLocked(scope, name string) *Runner {
	for _, rn := range s.runners {
		if sameScope(rn.Scope, scope) && strings.EqualFold(rn.Name, name) {
			return rn
		}
	}
	return nil
}

type jitRequest struct {
	Name          string   `json:"name"`
	RunnerGroupID int64    `json:"runner_group_id"`
	Labels        []string `json:"labels"`
	WorkFolder    string   `json:"work_folder"`
}

// generateJITConfig registers an offline ephemeral runner and returns its encoded config. Like
// GitHub it refuses a name already taken in the scope with 409 and validates the label count.
func (s *Server) generateJITConfig(w http.ResponseWriter, r *http.Request, installationID int64) {
	scope := scopeFromPath(r)
	if s.denyUnlessAccess(w, installationID, scope) {
		return
	}
	var req jitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	switch {
	case strings.TrimSpace(req.Name) == "":
		writeValidation(w, "name", "missing_field")
		return
	case len(req.Labels) < 1 || len(req.Labels) > 100:
		writeValidation(w, "labels", "invalid")
		return
	case req.RunnerGroupID < 1:
		writeValidation(w, "runner_group_id", "invalid")
		return
	}
	key, err := s.runnerKey()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	if wait := s.jitThrottleLocked(installationID); wait > 0 {
		s.mu.Unlock()
		s.writeFault(w, Fault{Status: http.StatusForbidden, RetryAfter: wait})
		return
	}
	if s.findRunnerByNameLocked(scope, req.Name) != nil {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("Already exists - A runner with the name %s already exists.", req.Name))
		return
	}
	if strings.Contains(scope, "/") {
		s.addRepoLocked(scope)
	}
	rn := &Runner{
		ID: s.newID("runner"), Name: req.Name, Scope: scope, Labels: dedupeFold(req.Labels),
		RunnerGroupID: req.RunnerGroupID, WorkFolder: req.WorkFolder, Status: RunnerOffline,
		CreatedAt: s.now(), clientID: randomHex(16), key: &key.PublicKey,
	}
	workFolder := rn.WorkFolder
	if workFolder == "" {
		workFolder = "_work"
	}
	encoded, err := EncodeJITConfig(JITConfig{
		Settings: RunnerSettings{
			AgentID: rn.ID, AgentName: rn.Name, PoolID: rn.RunnerGroupID, PoolName: runnerGroupName(rn.RunnerGroupID),
			ServerURL: s.URL() + pipelinesPath, GitHubURL: s.URL() + "/" + scope, WorkFolder: workFolder, Ephemeral: true,
		},
		Credentials: CredentialData{Scheme: "OAuth", Data: map[string]string{
			"clientId": rn.clientID, "authorizationUrl": s.URL() + runnerTokenPath + rn.clientID, "requireFipsCryptography": "True",
		}},
		Key: key, CA: string(s.CACertPEM()),
	})
	if err != nil {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.runners[rn.ID] = rn
	if s.opts.RecordJITConfigs {
		if s.issued == nil {
			s.issued = map[int64]string{}
		}
		s.issued[rn.ID] = encoded
	}
	body := map[string]any{"runner": s.runnerJSONLocked(rn), "encoded_jit_config": encoded}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, body)
}

// runnerGroupName names a runner group as GitHub names the one every account has.
func runnerGroupName(id int64) string {
	if id == 1 {
		return "Default"
	}
	return fmt.Sprintf("group-%d", id)
}

// runnerKey is a new runner's RSA key: its own, or the one every runner shares when
// Options.SharedRunnerKey is set.
func (s *Server) runnerKey() (*rsa.PrivateKey, error) {
	if !s.opts.SharedRunnerKey {
		return newRunnerKey()
	}
	s.sharedKeyOnce.Do(func() { s.sharedKey, s.sharedKeyErr = newRunnerKey() })
	return s.sharedKey, s.sharedKeyErr
}

func writeValidation(w http.ResponseWriter, field, code string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Invalid request.", "documentation_url": "https://docs.github.com/rest",
		"errors": []map[string]string{{"resource": "Runner", "field": field, "code": code}},
	})
}

func dedupeFold(labels []string) []string {
	var out []string
	for _, l := range labels {
		l = strings.TrimSpace(l)
		if l != "" && !labelsContainAll(out, []string{l}) {
			out = append(out, l)
		}
	}
	return out
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request, installationID int64) {
	scope := scopeFromPath(r)
	if s.denyUnlessAccess(w, installationID, scope) {
		return
	}
	name := r.URL.Query().Get("name")
	s.mu.Lock()
	var list []*Runner
	for _, rn := range s.runners {
		if sameScope(rn.Scope, scope) && (name == "" || strings.EqualFold(rn.Name, name)) {
			list = append(list, rn)
		}
	}
	sort.Slice(list, func(i, k int) bool { return list[i].ID < list[k].ID })
	start, end := s.page(w, r, len(list))
	out := make([]map[string]any, 0, end-start)
	for _, rn := range list[start:end] {
		out = append(out, s.runnerJSONLocked(rn))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "runners": out})
}

// runnerInScopeLocked finds the runner a path names; the caller checked access and holds s.mu.
func (s *Server) runnerInScopeLocked(w http.ResponseWriter, r *http.Request) (*Runner, bool) {
	scope := scopeFromPath(r)
	id, ok := pathID(w, r)
	if !ok {
		return nil, false
	}
	rn, ok := s.runners[id]
	if !ok || !sameScope(rn.Scope, scope) {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, false
	}
	return rn, true
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request, installationID int64) {
	if s.denyUnlessAccess(w, installationID, scopeFromPath(r)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.runnerInScopeLocked(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.runnerJSONLocked(rn))
}

// removeRunner deletes a runner; like GitHub it refuses with 422 while the runner runs a job.
func (s *Server) removeRunner(w http.ResponseWriter, r *http.Request, installationID int64) {
	if s.denyUnlessAccess(w, installationID, scopeFromPath(r)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, ok := s.runnerInScopeLocked(w, r)
	if !ok {
		return
	}
	if rn.Busy {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Bad request - Runner \"%s\" is still running a job\"", rn.Name))
		return
	}
	delete(s.runners, rn.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createRegistrationToken(w http.ResponseWriter, r *http.Request, installationID int64) {
	if s.denyUnlessAccess(w, installationID, scopeFromPath(r)) {
		return
	}
	expires := s.now().Add(time.Hour).UTC().Truncate(time.Second)
	writeJSON(w, http.StatusCreated, map[string]any{"token": strings.ToUpper(randomHex(15)), "expires_at": expires.Format(time.RFC3339)})
}

// jitThrottleLocked applies the JIT config rate limit: it records a creation and returns 0, or
// returns how long until the installation may create the next one. Called with s.mu held.
func (s *Server) jitThrottleLocked(installationID int64) time.Duration {
	if s.opts.JITPerWindow <= 0 {
		return 0
	}
	window := s.opts.JITWindow
	if window <= 0 {
		window = time.Minute
	}
	if s.jitTimes == nil {
		s.jitTimes = map[int64][]time.Time{}
	}
	now := s.now()
	recent := s.jitTimes[installationID]
	for len(recent) > 0 && !recent[0].After(now.Add(-window)) {
		recent = recent[1:]
	}
	if len(recent) >= s.opts.JITPerWindow {
		s.jitTimes[installationID] = recent
		s.jitRefused++
		return max(recent[0].Add(window).Sub(now), time.Second)
	}
	s.jitTimes[installationID] = append(recent, now)
	return 0
}

// JITRefusals counts JIT config requests refused by the JIT rate limit.
func (s *Server) JITRefusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jitRefused
}

// IssuedJITConfig is the encoded_jit_config issued for a runner, kept after the runner is gone
// when Options.RecordJITConfigs is set.
func (s *Server) IssuedJITConfig(runnerID int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.issued[runnerID]
	return c, ok
}
