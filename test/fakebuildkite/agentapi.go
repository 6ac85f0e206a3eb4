package fakebuildkite

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The agent API (/v3) as buildkite-agent speaks it:
//
//	POST /v3/register        Token <cluster agent token>  {name, hostname, meta_data}  → {id, access_token, endpoint, ...}
//	POST /v3/connect         Token <access token>                                        → 200
//	GET  /v3/ping            Token <access token>                                        → {} | {job} | {action: "disconnect"}
//	PUT  /v3/jobs/{id}/accept                                                            → job
//	PUT  /v3/jobs/{id}/start  {started_at}                                               → 200
//	PUT  /v3/jobs/{id}/finish {exit_status, finished_at}                                 → 200
//	GET  /v3/jobs/{id}                                                                   → {state}
//	POST /v3/heartbeat        {sent_at}                                                  → {sent_at, received_at}
//	POST /v3/disconnect                                                                  → 200
//	GET  /v3/metrics         Token <cluster agent token>                                 → agents/jobs counts per queue
//
// The shapes are those of buildkite-agent's api package (api/agents.go, api/pings.go,
// api/jobs.go, api/heartbeats.go in github.com/buildkite/agent/v3), which the conformance test
// uses as its client.
//
// A ping assigns the oldest scheduled job whose agent query rules the agent's tags satisfy
// (same queue), one job at a time. A disconnecting agent hands back a job it had not started.

type agentRegisterRequest struct {
	Name     string   `json:"name"`
	Hostname string   `json:"hostname"`
	Tags     []string `json:"meta_data"`
}

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request, c caller) {
	var req agentRegisterRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		writeError(w, http.StatusUnprocessableEntity, "Name can't be blank")
		return
	}
	for _, t := range req.Tags {
		if k, _, ok := strings.Cut(t, "="); !ok || k == "" {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Tag %q is not key=value", t))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &Agent{
		ID: NewUUID(), Name: req.Name, Hostname: req.Hostname, Tags: slices.Clone(req.Tags),
		ConnectionState: "registered", TokenID: c.clusterToken.ID, CreatedAt: s.now(), accessToken: randomHex(24),
	}
	s.agents[a.ID] = a
	writeJSON(w, http.StatusOK, map[string]any{
		"id": a.ID, "name": a.Name, "access_token": a.accessToken, "endpoint": s.URL() + "/v3",
		"ping_interval": 1, "job_status_interval": 1, "heartbeat_interval": 60, "meta_data": a.Tags,
	})
}

func (s *Server) agentConnect(w http.ResponseWriter, _ *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.agent.ConnectionState != "registered" && c.agent.ConnectionState != "connected" {
		writeError(w, http.StatusUnprocessableEntity, "Agent has already disconnected")
		return
	}
	c.agent.ConnectionState = "connected"
	writeJSON(w, http.StatusOK, map[string]any{"id": c.agent.ID, "connection_state": "connected"})
}

func (s *Server) agentDisconnect(w http.ResponseWriter, _ *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := c.agent
	if j := s.jobs[a.JobID]; j != nil && (j.State == JobAssigned || j.State == JobAccepted) {
		j.State, j.AgentID = JobScheduled, ""
	}
	a.ConnectionState, a.JobID = "disconnected", ""
	writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "connection_state": a.ConnectionState})
}

func (s *Server) agentPing(w http.ResponseWriter, _ *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := c.agent
	switch a.ConnectionState {
	case "stopping":
		writeJSON(w, http.StatusOK, map[string]any{"action": "disconnect"})
		return
	case "connected":
	default:
		writeError(w, http.StatusUnprocessableEntity, "Agent is not connected")
		return
	}
	if a.JobID != "" {
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	var best *Job
	for _, b := range s.builds {
		for _, j := range b.Jobs {
			if j.State == JobScheduled && j.Type == "script" && agentMayRun(a.Tags, j.AgentQueryRules) && best == nil {
				best = j
			}
		}
	}
	if best == nil {
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	best.State, best.AgentID = JobAssigned, a.ID
	a.JobID = best.ID
	writeJSON(w, http.StatusOK, map[string]any{"job": s.agentJobJSONLocked(best)})
}

// agentJobJSONLocked is a job as the agent API describes it: what to run, in env.
func (s *Server) agentJobJSONLocked(j *Job) map[string]any {
	return map[string]any{
		"id":       j.ID,
		"endpoint": s.URL() + "/v3",
		"state":    j.State,
		"env": map[string]string{
			"BUILDKITE_JOB_ID":            j.ID,
			"BUILDKITE_BUILD_ID":          j.Build.ID,
			"BUILDKITE_BUILD_NUMBER":      strconv.Itoa(j.Build.Number),
			"BUILDKITE_PIPELINE_SLUG":     j.Build.Pipeline.Slug,
			"BUILDKITE_ORGANIZATION_SLUG": s.opts.Organization,
			"BUILDKITE_COMMAND":           "make test",
			"BUILDKITE_LABEL":             j.Name,
		},
		"token": randomHex(16),
	}
}

// agentJob finds the job in the path and checks that it is the agent's and in state want.
func (s *Server) agentJobLocked(w http.ResponseWriter, r *http.Request, a *Agent, want string) *Job {
	j := s.jobs[r.PathValue("id")]
	switch {
	case j == nil:
		writeError(w, http.StatusNotFound, "No job found")
		return nil
	case j.AgentID != a.ID:
		writeError(w, http.StatusForbidden, "Job is not assigned to this agent")
		return nil
	case j.State != want:
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Job is %s, not %s", j.State, want))
		return nil
	}
	return j
}

func (s *Server) agentAccept(w http.ResponseWriter, r *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.agentJobLocked(w, r, c.agent, JobAssigned); j != nil {
		j.State = JobAccepted
		j.Acquisitions++
		writeJSON(w, http.StatusOK, s.agentJobJSONLocked(j))
	}
}

func (s *Server) agentStart(w http.ResponseWriter, r *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.agentJobLocked(w, r, c.agent, JobAccepted); j != nil {
		j.State, j.StartedAt = JobRunning, s.now()
		s.enqueueJobHookLocked("job.started", j)
		writeJSON(w, http.StatusOK, map[string]any{"state": j.State})
	}
}

func (s *Server) agentFinish(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		ExitStatus string `json:"exit_status"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	code, err := strconv.Atoi(req.ExitStatus)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "exit_status must be a number")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.agentJobLocked(w, r, c.agent, JobRunning); j != nil {
		j.State, j.FinishedAt, j.ExitStatus = JobFinished, s.now(), &code
		c.agent.JobID = ""
		c.agent.JobsRun++
		s.enqueueJobHookLocked("job.finished", j)
		writeJSON(w, http.StatusOK, map[string]any{"state": j.State})
	}
}

// agentJobState answers the agent's poll of its job's state (api.Client.GetJobState), by which
// it learns that a running job was canceled.
func (s *Server) agentJobState(w http.ResponseWriter, r *http.Request, c caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[r.PathValue("id")]
	if j == nil || j.AgentID != c.agent.ID {
		writeError(w, http.StatusNotFound, "No job found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": j.State})
}

// agentHeartbeat echoes the agent's sent_at with the time it was received
// (api.Client.Heartbeat); a disconnected agent has nothing to keep alive.
func (s *Server) agentHeartbeat(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		SentAt string `json:"sent_at"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.agent.ConnectionState == "disconnected" {
		writeError(w, http.StatusUnprocessableEntity, "Agent is not connected")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sent_at": req.SentAt, "received_at": s.now().UTC().Format(time.RFC3339Nano)})
}

type queueCounts struct {
	Idle  int `json:"idle"`
	Busy  int `json:"busy"`
	Total int `json:"total"`
}

type jobCounts struct {
	Scheduled int `json:"scheduled"`
	Running   int `json:"running"`
	Waiting   int `json:"waiting"`
	Total     int `json:"total"`
}

// metrics reports the cluster's agents and unfinished jobs per queue, as the agent metrics
// endpoint does for the cluster of the token.
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	agents := struct {
		queueCounts
		Queues map[string]*queueCounts `json:"queues"`
	}{Queues: map[string]*queueCounts{}}
	for _, a := range s.agents {
		if a.ConnectionState != "connected" {
			continue
		}
		q := agents.Queues[queueOf(a.Tags)]
		if q == nil {
			q = &queueCounts{}
			agents.Queues[queueOf(a.Tags)] = q
		}
		busy := a.JobID != ""
		for _, c := range []*queueCounts{&agents.queueCounts, q} {
			c.Total++
			if busy {
				c.Busy++
			} else {
				c.Idle++
			}
		}
	}
	jobs := struct {
		jobCounts
		Queues map[string]*jobCounts `json:"queues"`
	}{Queues: map[string]*jobCounts{}}
	for _, b := range s.builds {
		for _, j := range b.Jobs {
			if !j.Active() || j.Type != "script" {
				continue
			}
			name := queueOf(j.AgentQueryRules)
			q := jobs.Queues[name]
			if q == nil {
				q = &jobCounts{}
				jobs.Queues[name] = q
			}
			for _, c := range []*jobCounts{&jobs.jobCounts, q} {
				c.Total++
				switch j.State {
				case JobScheduled:
					c.Scheduled++
				case JobAssigned, JobAccepted, JobRunning:
					c.Running++
				default:
					c.Waiting++
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"agents":       agents,
		"jobs":         jobs,
		"organization": map[string]any{"slug": s.opts.Organization},
	})
}
