package fakebuildkite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Endpoint patterns, as registered with net/http. They key request counters and fault injection.
const (
	EndpointGetCluster         = "GET /v2/organizations/{org}/clusters/{cluster}"
	EndpointCreateClusterToken = "POST /v2/organizations/{org}/clusters/{cluster}/tokens"
	EndpointListClusterTokens  = "GET /v2/organizations/{org}/clusters/{cluster}/tokens"
	EndpointGetClusterToken    = "GET /v2/organizations/{org}/clusters/{cluster}/tokens/{id}"
	EndpointDeleteClusterToken = "DELETE /v2/organizations/{org}/clusters/{cluster}/tokens/{id}"
	EndpointListAgents         = "GET /v2/organizations/{org}/agents"
	EndpointGetAgent           = "GET /v2/organizations/{org}/agents/{id}"
	EndpointStopAgent          = "PUT /v2/organizations/{org}/agents/{id}/stop"
	EndpointListBuilds         = "GET /v2/builds"
	EndpointListOrgBuilds      = "GET /v2/organizations/{org}/builds"
	EndpointGetBuild           = "GET /v2/organizations/{org}/pipelines/{pipeline}/builds/{number}"
	EndpointListPipelineBuilds = "GET /v2/organizations/{org}/pipelines/{pipeline}/builds"
	EndpointListOrganizations  = "GET /v2/organizations"
	EndpointGetOrganization    = "GET /v2/organizations/{org}"
	EndpointListPipelines      = "GET /v2/organizations/{org}/pipelines"
	EndpointGetPipeline        = "GET /v2/organizations/{org}/pipelines/{pipeline}"

	EndpointAgentRegister   = "POST /v3/register"
	EndpointAgentConnect    = "POST /v3/connect"
	EndpointAgentDisconnect = "POST /v3/disconnect"
	EndpointAgentPing       = "GET /v3/ping"
	EndpointAgentAccept     = "PUT /v3/jobs/{id}/accept"
	EndpointAgentStart      = "PUT /v3/jobs/{id}/start"
	EndpointAgentFinish     = "PUT /v3/jobs/{id}/finish"
	EndpointAgentJobState   = "GET /v3/jobs/{id}"
	EndpointAgentHeartbeat  = "POST /v3/heartbeat"
	EndpointMetrics         = "GET /v3/metrics"

	endpointFakeJobs      = "GET /_fake/jobs"
	endpointFakeCreateJob = "POST /_fake/jobs"
	endpointFakeAgents    = "GET /_fake/agents"
)

// API token scopes the fake enforces.
const (
	ScopeReadClusters  = "read_clusters"
	ScopeWriteClusters = "write_clusters"
	ScopeReadAgents    = "read_agents"
	ScopeWriteAgents   = "write_agents"
	ScopeReadBuilds    = "read_builds"
	// ScopeReadOrganizations and ScopeReadPipelines guard the organization and pipeline reads
	// (https://buildkite.com/docs/apis/managing-api-tokens).
	ScopeReadOrganizations = "read_organizations"
	ScopeReadPipelines     = "read_pipelines"
)

// caller is who made a request: an API token, a cluster agent token or a registered agent.
type caller struct {
	apiToken     string
	clusterToken *ClusterToken
	agent        *Agent
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c caller)

// authKind says how an endpoint authenticates.
type authKind struct {
	scope        string // REST: Authorization: Bearer <API token> with this scope
	clusterToken bool   // agent API: Authorization: Token <cluster agent token>
	agentAccess  bool   // agent API: Authorization: Token <agent access token>
}

func (s *Server) routes() {
	s.handle(EndpointGetCluster, authKind{scope: ScopeReadClusters}, s.getCluster)
	s.handle(EndpointCreateClusterToken, authKind{scope: ScopeWriteClusters}, s.createClusterToken)
	s.handle(EndpointListClusterTokens, authKind{scope: ScopeReadClusters}, s.listClusterTokens)
	s.handle(EndpointGetClusterToken, authKind{scope: ScopeReadClusters}, s.getClusterToken)
	s.handle(EndpointDeleteClusterToken, authKind{scope: ScopeWriteClusters}, s.deleteClusterToken)
	s.handle(EndpointListAgents, authKind{scope: ScopeReadAgents}, s.listAgents)
	s.handle(EndpointGetAgent, authKind{scope: ScopeReadAgents}, s.getAgent)
	s.handle(EndpointStopAgent, authKind{scope: ScopeWriteAgents}, s.stopAgent)
	s.handle(EndpointListBuilds, authKind{scope: ScopeReadBuilds}, s.listBuilds)
	s.handle(EndpointListOrgBuilds, authKind{scope: ScopeReadBuilds}, s.listBuilds)
	s.handle(EndpointGetBuild, authKind{scope: ScopeReadBuilds}, s.getBuild)
	s.handle(EndpointListPipelineBuilds, authKind{scope: ScopeReadBuilds}, s.listBuilds)
	s.handle(EndpointListOrganizations, authKind{scope: ScopeReadOrganizations}, s.listOrganizations)
	s.handle(EndpointGetOrganization, authKind{scope: ScopeReadOrganizations}, s.getOrganization)
	s.handle(EndpointListPipelines, authKind{scope: ScopeReadPipelines}, s.listPipelines)
	s.handle(EndpointGetPipeline, authKind{scope: ScopeReadPipelines}, s.getPipeline)

	s.handle(EndpointAgentRegister, authKind{clusterToken: true}, s.agentRegister)
	s.handle(EndpointMetrics, authKind{clusterToken: true}, s.metrics)
	s.handle(EndpointAgentConnect, authKind{agentAccess: true}, s.agentConnect)
	s.handle(EndpointAgentDisconnect, authKind{agentAccess: true}, s.agentDisconnect)
	s.handle(EndpointAgentPing, authKind{agentAccess: true}, s.agentPing)
	s.handle(EndpointAgentAccept, authKind{agentAccess: true}, s.agentAccept)
	s.handle(EndpointAgentStart, authKind{agentAccess: true}, s.agentStart)
	s.handle(EndpointAgentFinish, authKind{agentAccess: true}, s.agentFinish)
	s.handle(EndpointAgentJobState, authKind{agentAccess: true}, s.agentJobState)
	s.handle(EndpointAgentHeartbeat, authKind{agentAccess: true}, s.agentHeartbeat)

	s.handle(endpointFakeJobs, authKind{}, s.fakeListJobs)
	s.handle(endpointFakeCreateJob, authKind{}, s.fakeCreateJob)
	s.handle(endpointFakeAgents, authKind{}, s.fakeListAgents)

	// Everything else: the API root as documented, and a JSON 404 for any other path or method.
	s.mux.HandleFunc("/", s.noRoute)
}

// noRoute answers requests no endpoint serves. GET / is the schema probe of
// https://buildkite.com/docs/apis/rest-api#schema ({"message": "...", "timestamp": <unix>});
// any other path, or a known path with another method, is a 404 in the JSON error shape of every
// documented Buildkite error, rather than net/http's text/plain 404 or 405. The message itself
// is not documented; clients read the status and the shape.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.URL.Path == "/" && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, map[string]any{"message": "🛠", "timestamp": s.now().Unix()})
		return
	}
	writeError(w, http.StatusNotFound, "No route found")
}

// handle wraps an endpoint with counting, injected faults, authentication, scope checks and the
// REST rate limit.
func (s *Server) handle(pattern string, auth authKind, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		s.countRequest(pattern)
		if f, ok := s.takeFault(pattern); ok && s.serveFault(w, r, f) {
			return
		}
		var c caller
		switch {
		case auth.scope != "":
			tok, ok := credential(r, "Bearer")
			if !ok {
				writeError(w, http.StatusUnauthorized, "Authentication required. Please supply a valid API Access Token: https://buildkite.com/docs/apis/rest-api#authentication")
				return
			}
			s.mu.Lock()
			scopes, known := s.apiTokens[tok]
			s.mu.Unlock()
			if !known {
				writeError(w, http.StatusUnauthorized, "Authentication required. Please supply a valid API Access Token: https://buildkite.com/docs/apis/rest-api#authentication")
				return
			}
			if !s.spendRate(w, tok) {
				return
			}
			if !contains(scopes, auth.scope) {
				writeError(w, http.StatusForbidden, fmt.Sprintf("Your access token does not have the %s scope", auth.scope))
				return
			}
			c.apiToken = tok
		case auth.clusterToken:
			tok, _ := credential(r, "Token")
			s.mu.Lock()
			c.clusterToken = s.clusterTokenByValueLocked(tok)
			s.mu.Unlock()
			if c.clusterToken == nil {
				writeError(w, http.StatusUnauthorized, "Invalid agent registration token")
				return
			}
		case auth.agentAccess:
			tok, _ := credential(r, "Token")
			s.mu.Lock()
			c.agent = s.agentByAccessTokenLocked(tok)
			s.mu.Unlock()
			if c.agent == nil {
				writeError(w, http.StatusUnauthorized, "Invalid access token")
				return
			}
		}
		// Authentication comes before the organization is looked up: a bad token is 401 on any
		// path, so an unauthenticated caller never learns which organizations exist.
		if org := r.PathValue("org"); org != "" && org != s.opts.Organization {
			writeError(w, http.StatusNotFound, "No organization found")
			return
		}
		if cl := r.PathValue("cluster"); cl != "" && cl != s.opts.ClusterID {
			writeError(w, http.StatusNotFound, "No cluster found")
			return
		}
		h(w, r, c)
	})
}

// credential extracts X from "Authorization: <scheme> X".
func credential(r *http.Request, scheme string) (string, bool) {
	got, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	return cred, ok && strings.EqualFold(got, scheme) && cred != ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// rateBucket is one API token's budget for the current minute.
type rateBucket struct {
	remaining int
	used      int
	resetAt   time.Time
}

// spendRate charges one request to the token's per-minute budget and writes the RateLimit-*
// headers Buildkite sends; it answers 429 when the budget is spent, with the body of
// https://buildkite.com/docs/apis/rest-api/rate-limits#exceeding-the-rate-limit.
func (s *Server) spendRate(w http.ResponseWriter, tok string) bool {
	s.mu.Lock()
	now := s.now()
	b, ok := s.rate[tok]
	if !ok || !now.Before(b.resetAt) {
		b = &rateBucket{remaining: s.opts.RateLimit, resetAt: now.Add(time.Minute)}
		s.rate[tok] = b
	}
	b.used++
	exhausted := b.remaining <= 0
	if !exhausted {
		b.remaining--
	}
	remaining, reset, used := b.remaining, b.resetAt, b.used
	s.mu.Unlock()
	resetIn := setRateHeaders(w, s.opts.RateLimit, remaining, reset.Sub(now))
	if exhausted {
		writeRateLimited(w, s.opts.RateLimit, used, resetIn)
		return false
	}
	return true
}

// writeRateLimited is Buildkite's 429: which limit was exceeded, the budget, the requests
// made in the window and the seconds until it is refilled.
func writeRateLimited(w http.ResponseWriter, limit, current, resetIn int) {
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"message": fmt.Sprintf("You have exceeded your API rate limit. Please wait %d seconds before making more requests.", resetIn),
		"scope":   "rest",
		"limit":   limit,
		"current": current,
		"reset":   resetIn,
	})
}

// setRateHeaders writes the organization-level headers of
// https://buildkite.com/docs/apis/rest-api/rate-limits#checking-rate-limit-details:
// RateLimit-Scope is "rest" and RateLimit-Reset the seconds until the budget is refilled,
// which it returns.
func setRateHeaders(w http.ResponseWriter, limit, remaining int, resetIn time.Duration) int {
	secs := max(int((resetIn+time.Second-1)/time.Second), 0)
	h := w.Header()
	h.Set("RateLimit-Scope", "rest")
	h.Set("RateLimit-Limit", strconv.Itoa(limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("RateLimit-Reset", strconv.Itoa(secs))
	return secs
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"message": message})
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 {
		return true
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Body is not valid JSON")
		return false
	}
	return true
}

// page applies Buildkite's page/per_page parameters (default 30, at most 100, per
// https://buildkite.com/docs/apis/rest-api#pagination) to n items and sets the Link header
// go-buildkite follows; it returns the half-open index range to serve. A per_page above the
// maximum is served as 100 rather than refused: the documentation names a maximum, not an error.
func (s *Server) page(w http.ResponseWriter, r *http.Request, n int) (int, int, bool) {
	q := r.URL.Query()
	perPage, page := 30, 1
	if v := q.Get("per_page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			writeError(w, http.StatusBadRequest, "per_page must be a positive number")
			return 0, 0, false
		}
		perPage = min(p, 100)
	}
	if v := q.Get("page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			writeError(w, http.StatusBadRequest, "page must be a positive number")
			return 0, 0, false
		}
		page = p
	}
	start, end := fakeserver.LinkPage(w, r, s.URL(), n, page, perPage)
	return start, end, true
}

// writePage answers a list request with the page of list that ?page= and ?per_page= ask for,
// each element rendered under the server's lock, and the Link header of page.
func writePage[T any](s *Server, w http.ResponseWriter, r *http.Request, list []T, render func(*T) map[string]any) {
	start, end, ok := s.page(w, r, len(list))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, end-start)
	for i := start; i < end; i++ {
		out = append(out, render(&list[i]))
	}
	writeJSON(w, http.StatusOK, out)
}
