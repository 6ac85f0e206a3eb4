package fakebuildkite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// restTime formats a time as the REST API does; nil for the zero time.
func restTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (s *Server) restURL(format string, args ...any) string {
	return s.URL() + "/v2/organizations/" + s.opts.Organization + fmt.Sprintf(format, args...)
}

func (s *Server) clusterTokenJSONLocked(t *ClusterToken, withValue bool) map[string]any {
	m := map[string]any{
		"id":          t.ID,
		"graphql_id":  "Q2x1c3RlclRva2VuLS0t" + t.ID[:8],
		"description": t.Description,
		"url":         s.restURL("/clusters/%s/tokens/%s", s.opts.ClusterID, t.ID),
		"cluster_url": s.restURL("/clusters/%s", s.opts.ClusterID),
		"created_at":  restTime(t.CreatedAt),
		"created_by":  map[string]any{"id": "00000000-0000-4000-8000-000000000001", "name": "HyperFleet"},
	}
	if withValue {
		m["token"] = t.Value
	}
	return m
}

func (s *Server) getCluster(w http.ResponseWriter, _ *http.Request, _ caller) {
	id := s.opts.ClusterID
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "graphql_id": "Q2x1c3Rlci0tLQ==", "name": "Default cluster", "description": "",
		"default_queue_id": NewUUIDFrom("default"),
		"url":              s.restURL("/clusters/%s", id),
		"web_url":          "https://buildkite.com/organizations/" + s.opts.Organization + "/clusters/" + id,
		"queues_url":       s.restURL("/clusters/%s/queues", id),
	})
}

func (s *Server) createClusterToken(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct {
		Description        string `json:"description"`
		AllowedIPAddresses string `json:"allowed_ip_addresses"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Description == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation failed: Description can't be blank")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.addClusterTokenLocked(req.Description)
	writeJSON(w, http.StatusCreated, s.clusterTokenJSONLocked(t, true))
}

func (s *Server) listClusterTokens(w http.ResponseWriter, r *http.Request, _ caller) {
	toks := s.ClusterTokens()
	writePage(s, w, r, toks, func(t *ClusterToken) map[string]any { return s.clusterTokenJSONLocked(t, false) })
}

func (s *Server) getClusterToken(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.clusterToks[r.PathValue("id")]
	if t == nil {
		writeError(w, http.StatusNotFound, "No cluster token found")
		return
	}
	writeJSON(w, http.StatusOK, s.clusterTokenJSONLocked(t, false))
}

// deleteClusterToken revokes a token: no agent can register with it any more. Agents that
// registered with it keep their own access tokens, as in Buildkite.
func (s *Server) deleteClusterToken(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	if s.clusterToks[id] == nil {
		writeError(w, http.StatusNotFound, "No cluster token found")
		return
	}
	delete(s.clusterToks, id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) agentJSONLocked(a *Agent) map[string]any {
	m := map[string]any{
		"id":               a.ID,
		"graphql_id":       "QWdlbnQtLS0" + a.ID[:8],
		"url":              s.restURL("/agents/%s", a.ID),
		"web_url":          "https://buildkite.com/organizations/" + s.opts.Organization + "/agents/" + a.ID,
		"name":             a.Name,
		"connection_state": a.ConnectionState,
		"hostname":         a.Hostname,
		"ip_address":       "127.0.0.1",
		"user_agent":       "buildkite-agent/3.0.0 (linux; amd64)",
		"version":          "3.0.0",
		"created_at":       restTime(a.CreatedAt),
		"meta_data":        slices.Clone(a.Tags),
	}
	if j := s.jobs[a.JobID]; j != nil && a.JobID != "" && j.Active() {
		m["job"] = s.jobJSONLocked(j)
	}
	return m
}

// listAgents lists connected agents only, as Buildkite does; ?name= filters by name.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, _ caller) {
	name := r.URL.Query().Get("name")
	var list []Agent
	for _, a := range s.Agents() {
		if a.ConnectionState == "connected" && (name == "" || a.Name == name) {
			list = append(list, a)
		}
	}
	writePage(s, w, r, list, s.agentJSONLocked)
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[r.PathValue("id")]
	if a == nil {
		writeError(w, http.StatusNotFound, "No agent found")
		return
	}
	writeJSON(w, http.StatusOK, s.agentJSONLocked(a))
}

// stopAgent asks a connected agent to stop; its next ping answers "disconnect". A busy agent
// is stopped only with force, which cancels its job.
func (s *Server) stopAgent(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct {
		Force bool `json:"force"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[r.PathValue("id")]
	if a == nil || a.ConnectionState != "connected" {
		writeError(w, http.StatusNotFound, "No agent found")
		return
	}
	if j := s.jobs[a.JobID]; j != nil && j.Active() {
		if !req.Force {
			writeError(w, http.StatusUnprocessableEntity, "Agent is currently running a job; stop it with force")
			return
		}
		j.State, j.FinishedAt = JobCanceled, s.now()
		s.enqueueJobHookLocked("job.finished", j)
	}
	a.ConnectionState = "stopping"
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) jobJSONLocked(j *Job) map[string]any {
	b := j.Build
	m := map[string]any{
		"id":                j.ID,
		"graphql_id":        "Sm9iLS0t" + j.ID[:8],
		"type":              j.Type,
		"name":              j.Name,
		"label":             j.Name,
		"step_key":          j.StepKey,
		"state":             j.State,
		"web_url":           fmt.Sprintf("https://buildkite.com/%s/%s/builds/%d#%s", s.opts.Organization, b.Pipeline.Slug, b.Number, j.ID),
		"command":           "make test",
		"agent_query_rules": slices.Clone(j.AgentQueryRules),
		"created_at":        restTime(j.CreatedAt),
		"scheduled_at":      restTime(j.ScheduledAt),
		"runnable_at":       restTime(j.RunnableAt),
		"started_at":        restTime(j.StartedAt),
		"finished_at":       restTime(j.FinishedAt),
		"retried":           false,
		"soft_failed":       false,
		"unblockable":       j.Type == "manual" && j.State == JobBlocked,
		"cluster_id":        s.opts.ClusterID,
		"cluster_queue_id":  NewUUIDFrom(queueOf(j.AgentQueryRules)),
		"priority":          map[string]any{"number": 0},
	}
	if j.ExitStatus != nil {
		m["exit_status"] = *j.ExitStatus
	}
	if a := s.agents[j.AgentID]; a != nil {
		m["agent"] = map[string]any{"id": a.ID, "name": a.Name, "connection_state": a.ConnectionState, "hostname": a.Hostname, "meta_data": slices.Clone(a.Tags)}
	}
	return m
}

func (s *Server) buildJSONLocked(b *Build) map[string]any {
	jobs := make([]map[string]any, 0, len(b.Jobs))
	for _, j := range b.Jobs {
		jobs = append(jobs, s.jobJSONLocked(j))
	}
	p := b.Pipeline
	return map[string]any{
		"id":         b.ID,
		"url":        s.restURL("/pipelines/%s/builds/%d", p.Slug, b.Number),
		"web_url":    fmt.Sprintf("https://buildkite.com/%s/%s/builds/%d", s.opts.Organization, p.Slug, b.Number),
		"number":     b.Number,
		"state":      b.state(),
		"blocked":    b.state() == "blocked",
		"message":    b.Message,
		"commit":     b.Commit,
		"branch":     b.Branch,
		"source":     "webhook",
		"created_at": restTime(b.CreatedAt),
		"jobs":       jobs,
		"pipeline": map[string]any{
			"id": p.ID, "slug": p.Slug, "name": p.Name, "repository": p.Repository, "cluster_id": s.opts.ClusterID,
			"url": s.restURL("/pipelines/%s", p.Slug),
		},
	}
}

// listBuilds lists builds newest first, of the pipeline in the path if there is one, filtered
// as https://buildkite.com/docs/apis/rest-api/builds#list-all-builds documents: state and branch
// each as one value (?state=passed) or Rails arrays (?state[]=scheduled&state[]=running, the
// form go-buildkite sends), "finished" standing for passed, failed, blocked and canceled; branch
// accepting * wildcards; commit as one value or an array.
func (s *Server) listBuilds(w http.ResponseWriter, r *http.Request, _ caller) {
	q := r.URL.Query()
	var states []string
	for _, st := range append(q["state[]"], q["state"]...) {
		if st == "finished" {
			states = append(states, "passed", "failed", "blocked", "canceled")
			continue
		}
		states = append(states, st)
	}
	branches := append(q["branch[]"], q["branch"]...)
	commits := append(q["commit[]"], q["commit"]...)
	pipeline := r.PathValue("pipeline")
	s.mu.Lock()
	if pipeline != "" && s.pipelines[pipeline] == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "No pipeline found")
		return
	}
	var list []*Build
	for i := len(s.builds) - 1; i >= 0; i-- {
		b := s.builds[i]
		switch {
		case pipeline != "" && b.Pipeline.Slug != pipeline:
		case len(states) > 0 && !slices.Contains(states, b.state()):
		case len(branches) > 0 && !slices.ContainsFunc(branches, func(p string) bool { return branchMatches(p, b.Branch) }):
		case len(commits) > 0 && !slices.Contains(commits, b.Commit):
		default:
			list = append(list, b)
		}
	}
	s.mu.Unlock()
	writePage(s, w, r, list, func(b **Build) map[string]any { return s.buildJSONLocked(*b) })
}

// branchMatches matches a branch filter, where * stands for any run of characters ("/" too).
func branchMatches(pattern, branch string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == branch
	}
	rest, ok := strings.CutPrefix(branch, parts[0])
	if !ok {
		return false
	}
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

func (s *Server) getBuild(w http.ResponseWriter, r *http.Request, _ caller) {
	n, err := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pipelines[r.PathValue("pipeline")] == nil {
		writeError(w, http.StatusNotFound, "No pipeline found")
		return
	}
	for _, b := range s.builds {
		if err == nil && b.Number == n && b.Pipeline.Slug == r.PathValue("pipeline") {
			writeJSON(w, http.StatusOK, s.buildJSONLocked(b))
			return
		}
	}
	writeError(w, http.StatusNotFound, "No build found")
}

// NewUUIDFrom returns a stable UUID-shaped ID for a name, e.g. a cluster queue's ID.
func NewUUIDFrom(name string) string {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}
