package fakegithub

import (
	"fmt"
	"net/http"
	"sort"
)

// The runner protocol lets a fake runner do with its JIT config what the real runner does with
// GitHub's: come online, take one job, finish it, and disappear. Every request is a POST with a
// JSON body carrying the encoded config:
//
//	POST /_fake/runner/online   {"jit_config": "..."}                 200 {"runner": {...}}
//	POST /_fake/runner/acquire  {"jit_config": "..."}                 200 {"job": {...}} | 204 none queued
//	POST /_fake/runner/complete {"jit_config": "...", "job_id": N,
//	                             "conclusion": "success"}             200 {"job": {...}}
//	POST /_fake/runner/offline  {"jit_config": "..."}                 204
//
// acquire hands out the oldest queued job the runner may run (same repository, or any
// repository of its organization) whose labels are all among the runner's labels, ignoring case;
// the job turns in_progress and the runner busy. complete turns it completed and deletes the
// runner, as GitHub deletes an ephemeral runner after its job. offline deletes an idle runner.
// A runner acquires at most one job: a second acquire answers 409. A config whose runner was
// deleted answers 404; a forged token 401. Each job transition sends its webhook when configured.
//
// Helpers for tests and the binary, without authentication:
//
//	GET  /_fake/jobs     200 [job...]   (with "acquisitions")
//	POST /_fake/jobs     {"repository": "o/r", "labels": [...], "name": "build"}  201 job
//	GET  /_fake/runners  200 [runner...] (with "scope")

type runnerRequest struct {
	JITConfig  string `json:"jit_config"`
	JobID      int64  `json:"job_id"`
	Conclusion string `json:"conclusion"`
}

// runnerFromRequestLocked authenticates a runner-protocol call; the caller holds s.mu.
func (s *Server) runnerFromRequestLocked(w http.ResponseWriter, req runnerRequest) (*Runner, bool) {
	cfg, err := DecodeJITConfig(req.JITConfig)
	if err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return nil, false
	}
	rn, ok := s.runners[cfg.RunnerID]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("runner %d is not registered", cfg.RunnerID))
		return nil, false
	}
	if rn.token != cfg.Token {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return nil, false
	}
	return rn, true
}

func (s *Server) runnerCall(w http.ResponseWriter, r *http.Request, fn func(*Runner, runnerRequest)) {
	var req runnerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runnerFromRequestLocked(w, req); ok {
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
