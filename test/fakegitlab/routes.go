package fakegitlab

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Endpoint patterns, as registered with net/http. They key request counters and fault injection.
const (
	EndpointCreateRunner       = "POST /api/v4/user/runners"
	EndpointDeleteRunner       = "DELETE /api/v4/runners/{id}"
	EndpointDeleteRunnerByTok  = "DELETE /api/v4/runners"
	EndpointGetRunner          = "GET /api/v4/runners/{id}"
	EndpointListAllRunners     = "GET /api/v4/runners/all"
	EndpointListGroupRunners   = "GET /api/v4/groups/{id}/runners"
	EndpointListProjectRunners = "GET /api/v4/projects/{id}/runners"
	EndpointListProjectJobs    = "GET /api/v4/projects/{id}/jobs"
	EndpointGetProjectJob      = "GET /api/v4/projects/{id}/jobs/{job}"
	EndpointListGroupProjects  = "GET /api/v4/groups/{id}/projects"
	EndpointProtectedBranches  = "GET /api/v4/projects/{id}/protected_branches"
	EndpointProtectedTags      = "GET /api/v4/projects/{id}/protected_tags"
	EndpointGetGroup           = "GET /api/v4/groups/{id}"
	EndpointGetProject         = "GET /api/v4/projects/{id}"
	EndpointListProjects       = "GET /api/v4/projects"
	EndpointListRunnerJobs     = "GET /api/v4/runners/{id}/jobs"
	EndpointListOwnedRunners   = "GET /api/v4/runners"
	EndpointCurrentUser        = "GET /api/v4/user"
	EndpointVersion            = "GET /api/v4/version"

	EndpointJobRequest   = "POST /api/v4/jobs/request"
	EndpointJobUpdate    = "PUT /api/v4/jobs/{id}"
	EndpointVerifyRunner = "POST /api/v4/runners/verify"
)

// handlerFunc serves an authenticated request; tok is the caller's access token.
type handlerFunc func(w http.ResponseWriter, r *http.Request, tok accessToken)

func (s *Server) routes() {
	s.handle(EndpointCreateRunner, ScopeCreateRunner, s.createRunner)
	s.handle(EndpointDeleteRunner, ScopeManageRunner, s.deleteRunner)
	s.handle(EndpointGetRunner, ScopeReadAPI, s.getRunner)
	s.handle(EndpointListAllRunners, ScopeReadAPI, s.listAllRunners)
	s.handle(EndpointListGroupRunners, ScopeReadAPI, s.listGroupRunners)
	s.handle(EndpointListProjectRunners, ScopeReadAPI, s.listProjectRunners)
	s.handle(EndpointListProjectJobs, ScopeReadAPI, s.listProjectJobs)
	s.handle(EndpointGetProjectJob, ScopeReadAPI, s.getProjectJob)
	s.handle(EndpointListGroupProjects, ScopeReadAPI, s.listGroupProjects)
	s.handle(EndpointProtectedBranches, ScopeReadAPI, s.listProtectedRefs(false))
	s.handle(EndpointProtectedTags, ScopeReadAPI, s.listProtectedRefs(true))
	s.handle(EndpointGetGroup, ScopeReadAPI, s.getGroup)
	s.handle(EndpointGetProject, ScopeReadAPI, s.getProject)
	s.handle(EndpointListProjects, ScopeReadAPI, s.listProjects)
	s.handle(EndpointListRunnerJobs, ScopeReadAPI, s.listRunnerJobs)
	s.handle(EndpointListOwnedRunners, ScopeReadAPI, s.listOwnedRunners)
	s.handle(EndpointCurrentUser, ScopeReadUser, s.getCurrentUser)
	s.handle(EndpointVersion, ScopeReadUser, s.getVersion)

	// The runner's endpoints authenticate with the runner or job token in the body.
	s.handleRunner(EndpointDeleteRunnerByTok, s.deleteRunnerByToken)
	s.handleRunner(EndpointJobRequest, s.requestJob)
	s.handleRunner(EndpointJobUpdate, s.updateJob)
	s.handleRunner(EndpointVerifyRunner, s.verifyRunner)
	s.adminRoutes()
}

// handleRunner wraps a runner endpoint with counting and injected faults.
func (s *Server) handleRunner(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		s.countRequest(pattern)
		if f, ok := s.takeFault(pattern); ok && s.serveFault(w, r, f) {
			return
		}
		h(w, r)
	})
}

// handle wraps a REST endpoint with counting, injected faults, authentication (PRIVATE-TOKEN
// or Authorization: Bearer), the per-user rate limit and the scope check. api grants every
// scope; read_api grants every GET. The refusals carry GitLab's bodies: an unknown token is
// {"message":"401 Unauthorized"}, a revoked one OAuth's invalid_token, a missing scope OAuth's
// insufficient_scope with the scopes that would do (docs.gitlab.com/api/rest/authentication/).
func (s *Server) handle(pattern, scope string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		s.countRequest(pattern)
		if f, ok := s.takeFault(pattern); ok && s.serveFault(w, r, f) {
			return
		}
		s.mu.Lock()
		tok, known := s.tokens[credential(r)]
		s.mu.Unlock()
		switch {
		case !known:
			writeMessage(w, http.StatusUnauthorized, "401 Unauthorized")
			return
		case tok.revoked:
			w.Header().Set("WWW-Authenticate", `Bearer realm="GitLab", error="invalid_token"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token",
				"error_description": "Token was revoked. You have to re-authorize from the user."})
			return
		}
		if !s.spendRate(w, tok.user) {
			return
		}
		if !tok.grants(scope, r.Method) {
			allowed := []string{ScopeAPI}
			if r.Method == http.MethodGet {
				allowed = append(allowed, ScopeReadAPI)
			}
			if scope != ScopeAPI && scope != ScopeReadAPI {
				allowed = append(allowed, scope)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="GitLab", error="insufficient_scope"`)
			writeJSON(w, http.StatusForbidden, map[string]any{
				"error":             "insufficient_scope",
				"error_description": "The request requires higher privileges than provided by the access token.",
				"scope":             strings.Join(allowed, " "),
			})
			return
		}
		h(w, r, tok)
	})
}

func (t accessToken) grants(scope, method string) bool {
	return slices.Contains(t.scopes, ScopeAPI) || slices.Contains(t.scopes, scope) ||
		(method == http.MethodGet && slices.Contains(t.scopes, ScopeReadAPI))
}

// credential is the PRIVATE-TOKEN header or the bearer token.
func credential(r *http.Request) string {
	if v := r.Header.Get("PRIVATE-TOKEN"); v != "" {
		return v
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(cred)
	}
	return ""
}

// rateBucket is one user's budget for the current minute.
type rateBucket struct {
	observed int
	resetAt  time.Time
}

// spendRate charges one request to the user's per-minute budget and writes GitLab's
// RateLimit-* headers; over the limit it answers 429 "Retry later" with Retry-After. GitLab
// counts authenticated API requests per user, not per token
// (docs.gitlab.com/administration/settings/user_and_ip_rate_limits/).
func (s *Server) spendRate(w http.ResponseWriter, user int64) bool {
	s.mu.Lock()
	now := s.now()
	b, ok := s.rate[user]
	if !ok || !now.Before(b.resetAt) {
		b = &rateBucket{resetAt: now.Add(time.Minute)}
		s.rate[user] = b
	}
	b.observed++
	observed, reset := b.observed, b.resetAt
	s.mu.Unlock()
	limit := s.opts.RateLimit
	setRateHeaders(w, limit, observed, reset)
	if observed > limit {
		retryAfter(w, reset.Sub(now))
		return false
	}
	return true
}

// setRateHeaders writes the headers GitLab sends on rate-limited paths: RateLimit-Reset is a
// Unix time, RateLimit-ResetTime the same instant as an HTTP date.
func setRateHeaders(w http.ResponseWriter, limit, observed int, reset time.Time) {
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.Itoa(limit))
	h.Set("RateLimit-Name", "throttle_authenticated_api")
	h.Set("RateLimit-Observed", strconv.Itoa(observed))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(limit-observed, 0)))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("RateLimit-ResetTime", reset.UTC().Format(http.TimeFormat))
}

// retryAfter answers 429 as GitLab's throttle does: plain text "Retry later".
func retryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int((wait+time.Second-1)/time.Second), 1)))
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("Retry later\n"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeMessage writes GitLab's {"message": "..."} error body.
func writeMessage(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"message": message})
}

// serveUnrouted answers a request no endpoint serves as GitLab's API does: a path it does not
// know is 404 {"error":"404 Not Found"}; a known path with another method is 405 with Allow
// (docs.gitlab.com/api/rest/troubleshooting/#status-codes). ServeMux's own answer (h) only
// tells which of the two it is.
func serveUnrouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.Header().Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "405 Not Allowed"})
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"error": "404 Not Found"})
}

// grapeBool reads a boolean parameter as GitLab's Grape API coerces it: true, True, 1, yes,
// t, on ... and their negations; ok is false for anything else, which GitLab refuses with
// 400 "<param> is invalid".
func grapeBool(v string) (value, ok bool) {
	switch strings.ToLower(v) {
	case "1", "on", "t", "true", "y", "yes":
		return true, true
	case "0", "off", "f", "false", "n", "no":
		return false, true
	}
	return false, false
}

// invalidParam is a parameter GitLab cannot coerce; its message is GitLab's 400 error.
type invalidParam string

func (p invalidParam) Error() string { return string(p) + " is invalid" }

// writeBadRequest writes GitLab's {"error": "..."} parameter error body.
func writeBadRequest(w http.ResponseWriter, message string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": message})
}

// paginate applies page/per_page (default 20, at most 100) to n items and writes GitLab's
// offset pagination headers (X-Page, X-Next-Page empty on the last page, X-Total, Link); it
// returns the half-open index range to serve.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, n int) (int, int, bool) {
	q := r.URL.Query()
	perPage, page := 20, 1
	if v := q.Get("per_page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			writeBadRequest(w, "per_page is invalid")
			return 0, 0, false
		}
		perPage = min(p, 100)
	}
	if v := q.Get("page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			writeBadRequest(w, "page is invalid")
			return 0, 0, false
		}
		page = p
	}
	start := min((page-1)*perPage, n)
	end := min(start+perPage, n)
	pages := max((n+perPage-1)/perPage, 1)
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(perPage))
	h.Set("X-Total", strconv.Itoa(n))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(p int, rel string) string {
		q2 := r.URL.Query()
		q2.Set("page", strconv.Itoa(p))
		q2.Set("per_page", strconv.Itoa(perPage))
		u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q2.Encode()}
		return fmt.Sprintf("<%s%s>; rel=%q", s.URL(), u.String(), rel)
	}
	var links []string
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	if page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		links = append(links, link(page-1, "prev"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	return start, end, true
}

// timeJSON renders a time as GitLab's API does, null when unset.
func timeJSON(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
