package fakegithub

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// The runner protocol lets a fake runner do with its JIT config what the real runner does with
// GitHub's: authenticate with the key in its config, come online, take one job, finish it, and
// disappear. The runner first exchanges a client assertion (a JWT signed with the key in its
// .credentials_rsaparams) for an access token at the authorizationUrl of its .credentials, as
// actions/runner does (OAuth 2.0 client credentials with a jwt-bearer assertion, RFC 7523):
//
//	POST /_services/vstoken/_apis/oauth2/token/{clientId}
//	     grant_type=client_credentials&client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer
//	     &client_assertion=<JWT>                                   200 {"access_token", "token_type", "expires_in"}
//
// A bad grant type or assertion type answers 400 {"error": "unsupported_grant_type" |
// "invalid_request"}; an assertion that is not signed by the runner's key, names another client,
// is for another audience or has expired answers 401 {"error": "invalid_client"}. A new token
// replaces the runner's previous one.
//
// Then every call is a POST with "Authorization: Bearer <access token>" (the fake's stand-in for
// the Actions broker and run service, which it does not implement):
//
//	POST /_fake/runner/online   {}                                  200 {"runner": {...}}
//	POST /_fake/runner/acquire  {}                                  200 {"job": {...}} | 204 none queued
//	POST /_fake/runner/complete {"job_id": N, "conclusion": "success"} 200 {"job": {...}}
//	POST /_fake/runner/offline  {}                                  204
//
// acquire hands out the oldest queued job the runner may run (same repository, or any
// repository of its organization) whose labels are all among the runner's labels, ignoring case;
// the job turns in_progress and the runner busy. complete turns it completed and deletes the
// runner, as GitHub deletes an ephemeral runner after its job. offline deletes an idle runner.
// A runner acquires at most one job: a second acquire answers 409. A token that no registered
// runner holds (never issued, replaced, or its runner deleted) answers 401. Each job transition
// sends its webhook when configured.
//
// Helpers for tests and the binary, without authentication:
//
//	GET  /_fake/jobs     200 [job...]   (with "acquisitions")
//	POST /_fake/jobs     {"repository": "o/r", "labels": [...], "name": "build"}  201 job
//	GET  /_fake/runners  200 [runner...] (with "scope")

// runnerTokenPath is where runners exchange client assertions for access tokens; the client ID
// follows it.
const runnerTokenPath = "/_services/vstoken/_apis/oauth2/token/"

type runnerRequest struct {
	JobID      int64  `json:"job_id"`
	Conclusion string `json:"conclusion"`
}

func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// runnerAccessToken verifies a runner's client assertion and issues its access token.
func (s *Server) runnerAccessToken(w http.ResponseWriter, r *http.Request, _ int64) {
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	switch {
	case r.PostForm.Get("grant_type") != "client_credentials":
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be client_credentials")
		return
	case r.PostForm.Get("client_assertion_type") != clientAssertionJWT:
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "client_assertion_type must be "+clientAssertionJWT)
		return
	}
	clientID := r.PathValue("clientId")
	s.mu.Lock()
	defer s.mu.Unlock()
	var rn *Runner
	for _, c := range s.runners {
		if c.clientID == clientID {
			rn = c
			break
		}
	}
	if rn == nil {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "no runner is registered with this client ID")
		return
	}
	claims := &jwt.RegisteredClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(r.PostForm.Get("client_assertion"), claims, func(*jwt.Token) (any, error) {
		return rn.key, nil
	}); err != nil {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "client assertion: "+err.Error())
		return
	}
	now := s.now()
	switch {
	case claims.Issuer != clientID || claims.Subject != clientID:
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "the assertion's iss and sub must be the client ID")
		return
	case !claims.VerifyAudience(s.URL()+runnerTokenPath+clientID, true):
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "the assertion's aud must be the token endpoint")
		return
	case claims.ExpiresAt == nil || !claims.ExpiresAt.After(now):
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "the assertion has expired")
		return
	case claims.NotBefore != nil && claims.NotBefore.After(now.Add(time.Minute)):
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "the assertion is not valid yet")
		return
	}
	rn.accessToken = randomHex(20)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": rn.accessToken, "token_type": "bearer", "expires_in": 3600})
}

// runnerFromRequestLocked authenticates a runner-protocol call; the caller holds s.mu.
func (s *Server) runnerFromRequestLocked(w http.ResponseWriter, r *http.Request) (*Runner, bool) {
	token := bearer(r)
	if token != "" {
		for _, rn := range s.runners {
			if rn.accessToken == token {
				return rn, true
			}
		}
	}
	writeError(w, http.StatusUnauthorized, "Bad credentials")
	return nil, false
}

func (s *Server) runnerCall(w http.ResponseWriter, r *http.Request, fn func(*Runner, runnerRequest)) {
	var req runnerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runnerFromRequestLocked(w, r); ok {
		fn(rn, req)
	}
}

func (s *Server) fakeRunnerOnline(w http.ResponseWriter, r *http.Request, _ int64) {
	s.runnerCall(w, r, func(rn *Runner, _ runnerRequest) {
		rn.Status = RunnerOnline
		writeJSON(w, http.StatusOK, map[string]any{"runner": s.runnerJSONLocked(rn)})
	})
}

func (s *Server) fakeRunnerAcquire(w http.ResponseWriter, r *http.Request, _ int64) {
	s.runnerCall(w, r, func(rn *Runner, _ runnerRequest) {
		switch {
		case rn.JobID != 0:
			writeError(w, http.StatusConflict, fmt.Sprintf("runner %s already ran job %d", rn.Name, rn.JobID))
			return
		case rn.Status != RunnerOnline:
			writeError(w, http.StatusConflict, fmt.Sprintf("runner %s is offline", rn.Name))
			return
		}
		j := s.nextJobForLocked(rn)
		if j == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		j.Status, j.StartedAt, j.RunnerID, j.RunnerName = JobInProgress, s.now(), rn.ID, rn.Name
		j.Acquisitions++
		rn.Busy, rn.JobID = true, j.ID
		s.enqueueJobHookLocked("in_progress", j)
		writeJSON(w, http.StatusOK, map[string]any{"job": s.jobJSONLocked(j)})
	})
}

func (s *Server) nextJobForLocked(rn *Runner) *Job {
	var best *Job
	for _, j := range s.jobs {
		if j.Status == JobQueued && runnerMayRun(rn.Scope, j.Repository) && labelsContainAll(rn.Labels, j.Labels) &&
			(best == nil || j.ID < best.ID) {
			best = j
		}
	}
	return best
}

func (s *Server) fakeRunnerComplete(w http.ResponseWriter, r *http.Request, _ int64) {
	s.runnerCall(w, r, func(rn *Runner, req runnerRequest) {
		j, ok := s.jobs[req.JobID]
		if !ok || rn.JobID != req.JobID || j.Status != JobInProgress {
			writeError(w, http.StatusConflict, fmt.Sprintf("job %d is not in progress on runner %s", req.JobID, rn.Name))
			return
		}
		if req.Conclusion == "" {
			req.Conclusion = "success"
		}
		j.Status, j.Conclusion, j.CompletedAt = JobCompleted, req.Conclusion, s.now()
		delete(s.runners, rn.ID)
		s.enqueueJobHookLocked("completed", j)
		writeJSON(w, http.StatusOK, map[string]any{"job": s.jobJSONLocked(j)})
	})
}

func (s *Server) fakeRunnerOffline(w http.ResponseWriter, r *http.Request, _ int64) {
	s.runnerCall(w, r, func(rn *Runner, _ runnerRequest) {
		if rn.Busy {
			writeError(w, http.StatusConflict, fmt.Sprintf("runner %s is running job %d", rn.Name, rn.JobID))
			return
		}
		delete(s.runners, rn.ID)
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) fakeListJobs(w http.ResponseWriter, _ *http.Request, _ int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(s.jobs))
	for _, j := range s.jobs {
		m := s.jobJSONLocked(j)
		m["repository"], m["acquisitions"] = j.Repository, j.Acquisitions
		out = append(out, m)
	}
	sort.Slice(out, func(i, k int) bool { return out[i]["id"].(int64) < out[k]["id"].(int64) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) fakeCreateJob(w http.ResponseWriter, r *http.Request, _ int64) {
	var req struct {
		Repository string   `json:"repository"`
		Labels     []string `json:"labels"`
		Name       string   `json:"name"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if _, _, ok := splitRepo(req.Repository); !ok || len(req.Labels) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "repository (owner/name) and labels are required")
		return
	}
	opts := []JobOption{}
	if req.Name != "" {
		opts = append(opts, WithJobName(req.Name))
	}
	j := s.CreateJob(req.Repository, req.Labels, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.jobJSONLocked(s.jobs[j.ID]))
}

func (s *Server) fakeListRunners(w http.ResponseWriter, _ *http.Request, _ int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(s.runners))
	for _, rn := range s.runners {
		m := s.runnerJSONLocked(rn)
		m["scope"] = rn.Scope
		out = append(out, m)
	}
	sort.Slice(out, func(i, k int) bool { return out[i]["id"].(int64) < out[k]["id"].(int64) })
	writeJSON(w, http.StatusOK, out)
}
