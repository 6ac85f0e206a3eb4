package fakegithub

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
	EndpointAccessToken        = "POST /app/installations/{id}/access_tokens"
	EndpointAppInstallations   = "GET /app/installations"
	EndpointRepoInstallation   = "GET /repos/{owner}/{repo}/installation"
	EndpointOrgInstallation    = "GET /orgs/{org}/installation"
	EndpointInstallationRepos  = "GET /installation/repositories"
	EndpointRepoJITConfig      = "POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig"
	EndpointOrgJITConfig       = "POST /orgs/{org}/actions/runners/generate-jitconfig"
	EndpointRepoRunners        = "GET /repos/{owner}/{repo}/actions/runners"
	EndpointOrgRunners         = "GET /orgs/{org}/actions/runners"
	EndpointRepoRunner         = "GET /repos/{owner}/{repo}/actions/runners/{id}"
	EndpointOrgRunner          = "GET /orgs/{org}/actions/runners/{id}"
	EndpointRepoRemoveRunner   = "DELETE /repos/{owner}/{repo}/actions/runners/{id}"
	EndpointOrgRemoveRunner    = "DELETE /orgs/{org}/actions/runners/{id}"
	EndpointRepoRegistration   = "POST /repos/{owner}/{repo}/actions/runners/registration-token"
	EndpointOrgRegistration    = "POST /orgs/{org}/actions/runners/registration-token"
	EndpointWorkflowJob        = "GET /repos/{owner}/{repo}/actions/jobs/{id}"
	EndpointWorkflowRuns       = "GET /repos/{owner}/{repo}/actions/runs"
	EndpointWorkflowRunJobs    = "GET /repos/{owner}/{repo}/actions/runs/{id}/jobs"
	EndpointRateLimit          = "GET /rate_limit"
	EndpointRunnerToken        = "POST " + runnerTokenPath + "{clientId}"
	endpointFakeRunnerOnline   = "POST /_fake/runner/online"
	endpointFakeRunnerAcquire  = "POST /_fake/runner/acquire"
	endpointFakeRunnerComplete = "POST /_fake/runner/complete"
	endpointFakeRunnerOffline  = "POST /_fake/runner/offline"
	endpointFakeJobs           = "GET /_fake/jobs"
	endpointFakeCreateJob      = "POST /_fake/jobs"
	endpointFakeRunners        = "GET /_fake/runners"
)

type authKind int

const (
	authNone         authKind = iota
	authAppJWT                // Authorization: Bearer <App JWT>
	authInstallation          // Authorization: token|Bearer <installation token>
)

// handlerFunc serves one endpoint; installationID is set for installation-token endpoints.
type handlerFunc func(w http.ResponseWriter, r *http.Request, installationID int64)

func (s *Server) routes() {
	s.handle(EndpointAccessToken, authAppJWT, s.createAccessToken)
	s.handle(EndpointAppInstallations, authAppJWT, s.listAppInstallations)
	s.handle(EndpointRepoInstallation, authAppJWT, s.getRepoInstallation)
	s.handle(EndpointOrgInstallation, authAppJWT, s.getOrgInstallation)
	s.handle(EndpointInstallationRepos, authInstallation, s.listInstallationRepos)
	s.handle(EndpointRateLimit, authInstallation, s.getRateLimit)

	s.handle(EndpointRepoJITConfig, authInstallation, s.generateJITConfig)
	s.handle(EndpointOrgJITConfig, authInstallation, s.generateJITConfig)
	s.handle(EndpointRepoRunners, authInstallation, s.listRunners)
	s.handle(EndpointOrgRunners, authInstallation, s.listRunners)
	s.handle(EndpointRepoRunner, authInstallation, s.getRunner)
	s.handle(EndpointOrgRunner, authInstallation, s.getRunner)
	s.handle(EndpointRepoRemoveRunner, authInstallation, s.removeRunner)
	s.handle(EndpointOrgRemoveRunner, authInstallation, s.removeRunner)
	s.handle(EndpointRepoRegistration, authInstallation, s.createRegistrationToken)
	s.handle(EndpointOrgRegistration, authInstallation, s.createRegistrationToken)

	s.handle(EndpointWorkflowJob, authInstallation, s.getWorkflowJob)
	s.handle(EndpointWorkflowRuns, authInstallation, s.listWorkflowRuns)
	s.handle(EndpointWorkflowRunJobs, authInstallation, s.listWorkflowRunJobs)

	s.handle(EndpointRunnerToken, authNone, s.runnerAccessToken)
	s.handle(endpointFakeRunnerOnline, authNone, s.fakeRunnerOnline)
	s.handle(endpointFakeRunnerAcquire, authNone, s.fakeRunnerAcquire)
	s.handle(endpointFakeRunnerComplete, authNone, s.fakeRunnerComplete)
	s.handle(endpointFakeRunnerOffline, authNone, s.fakeRunnerOffline)
	s.handle(endpointFakeJobs, authNone, s.fakeListJobs)
	s.handle(endpointFakeCreateJob, authNone, s.fakeCreateJob)
	s.handle(endpointFakeRunners, authNone, s.fakeListRunners)

	// Anything else, a path the fake does not serve or a method a served path does not take, is
	// answered as GitHub answers it.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		writeJSON(w, http.StatusNotFound, map[string]string{
			"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404",
		})
	})
}

// handle wraps an endpoint with what every GitHub response has: counting, injected faults,
// authentication and rate-limit headers.
func (s *Server) handle(pattern string, auth authKind, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-GitHub-Request-Id", strconv.FormatInt(time.Now().UnixNano(), 36))
		s.countRequest(pattern)
		if f, ok := s.takeFault(pattern); ok && s.serveFault(w, r, f) {
			return
		}
		var installationID int64
		switch auth {
		case authAppJWT:
			if err := s.verifyAppJWT(bearer(r)); err != nil {
				writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
				return
			}
			// App-level calls have their own budget, kept under installation ID 0.
			if !s.spendRate(w, 0) {
				return
			}
		case authInstallation:
			id, status, msg := s.checkInstallationToken(bearer(r))
			if status != 0 {
				writeError(w, status, msg)
				return
			}
			if r.Method == http.MethodGet && s.hasBudget(id) {
				s.serveConditional(w, r, id, h, func(w http.ResponseWriter) bool { return s.spendRate(w, id) })
				return
			}
			if !s.spendRate(w, id) {
				return
			}
			installationID = id
		}
		h(w, r, installationID)
	})
}

// bearer extracts the credential of "Authorization: token X" or "Authorization: Bearer X".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if scheme, cred, ok := strings.Cut(h, " "); ok && (strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "bearer")) {
		return strings.TrimSpace(cred)
	}
	return ""
}

// spendRate charges one request to the installation's hourly budget and writes the headers
// go-github reads; it answers 403 with X-RateLimit-Remaining: 0 when the budget is spent.
func (s *Server) spendRate(w http.ResponseWriter, installationID int64) bool {
	s.mu.Lock()
	now := s.now()
	b, ok := s.rate[installationID]
	if !ok || now.After(b.resetAt) {
		b = &rateBucket{remaining: s.opts.RateLimit, resetAt: now.Add(time.Hour)}
		s.rate[installationID] = b
	}
	exhausted := b.remaining <= 0
	if !exhausted {
		b.remaining--
	}
	remaining, reset := b.remaining, b.resetAt
	s.mu.Unlock()
	setRateHeaders(w, s.opts.RateLimit, remaining, reset)
	if exhausted {
		msg := fmt.Sprintf("API rate limit exceeded for installation ID %d.", installationID)
		if installationID == 0 {
			msg = "API rate limit exceeded for the App."
		}
		writeErrorDoc(w, http.StatusForbidden, msg,
			"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api")
		return false
	}
	return true
}

// hasBudget reports whether the installation has requests left in its window (or no window yet).
func (s *Server) hasBudget(installationID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.rate[installationID]
	return !ok || s.now().After(b.resetAt) || b.remaining > 0
}

func setRateHeaders(w http.ResponseWriter, limit, remaining int, reset time.Time) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(limit-remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func (s *Server) getRateLimit(w http.ResponseWriter, _ *http.Request, installationID int64) {
	s.mu.Lock()
	b := s.rate[installationID]
	core := map[string]any{"limit": s.opts.RateLimit, "remaining": b.remaining, "reset": b.resetAt.Unix(), "used": s.opts.RateLimit - b.remaining}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"resources": map[string]any{"core": core}, "rate": core})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeErrorDoc(w, status, message, "https://docs.github.com/rest")
}

func writeErrorDoc(w http.ResponseWriter, status int, message, doc string) {
	writeJSON(w, status, map[string]any{"message": message, "documentation_url": doc, "status": strconv.Itoa(status)})
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return id, true
}

// page applies GitHub's per_page/page parameters to n items and sets the Link header
// go-github follows; it returns the half-open index range to serve.
func (s *Server) page(w http.ResponseWriter, r *http.Request, n int) (int, int) {
	q := r.URL.Query()
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	if perPage <= 0 {
		perPage = 30
	}
	perPage = min(perPage, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	return fakeserver.LinkPage(w, r, s.URL(), n, page, perPage)
}
