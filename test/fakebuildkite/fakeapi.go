package fakebuildkite

import (
	"net/http"
	"strings"
)

// Helpers for tests and tools (make jobs), without authentication:
//
//	GET  /_fake/jobs    200 [job...] (with "pipeline" and "acquisitions")
//	POST /_fake/jobs    {"pipeline": "p", "agent_query_rules": ["queue=linux"], "name": "build",
//	                     "state": "scheduled"}  201 job
//	GET  /_fake/agents  200 [agent...] (every agent, connected or not, with "jobs_run")

func (s *Server) fakeListJobs(w http.ResponseWriter, _ *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, b := range s.builds {
		for _, j := range b.Jobs {
			m := s.jobJSONLocked(j)
			m["pipeline"], m["acquisitions"] = b.Pipeline.Slug, j.Acquisitions
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) fakeCreateJob(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct {
		Pipeline        string   `json:"pipeline"`
		AgentQueryRules []string `json:"agent_query_rules"`
		Name            string   `json:"name"`
		State           string   `json:"state"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Pipeline == "" || strings.Contains(req.Pipeline, "/") {
		writeError(w, http.StatusUnprocessableEntity, "pipeline (a slug) is required")
		return
	}
	for _, rule := range req.AgentQueryRules {
		if k, _, ok := strings.Cut(rule, "="); !ok || k == "" {
			writeError(w, http.StatusUnprocessableEntity, "agent_query_rules are key=value")
			return
		}
	}
	var opts []JobOption
	if req.Name != "" {
		opts = append(opts, WithName(req.Name))
	}
	switch req.State {
	case "", JobScheduled:
	case JobWaiting, JobBlocked, JobLimited, JobPending:
		opts = append(opts, WithState(req.State))
	default:
		writeError(w, http.StatusUnprocessableEntity, "state must be scheduled, waiting, blocked, limited or pending")
		return
	}
	j := s.CreateJob(req.Pipeline, req.AgentQueryRules, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.jobJSONLocked(s.jobs[j.ID]))
}

func (s *Server) fakeListAgents(w http.ResponseWriter, _ *http.Request, _ caller) {
	agents := s.Agents()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(agents))
	for i := range agents {
		m := s.agentJSONLocked(&agents[i])
		m["jobs_run"], m["token_id"] = agents[i].JobsRun, agents[i].TokenID
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}
