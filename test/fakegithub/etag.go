package fakegithub

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
)

// serveConditional answers a GET as GitHub does: every 200 carries a strong ETag of its body, and
// a request whose If-None-Match names the current ETag gets 304 Not Modified with no body and
// does not count against the rate limit. spend charges the budget (false: refused, already
// answered); it is called only when the answer is not a 304.
func (s *Server) serveConditional(w http.ResponseWriter, r *http.Request, installationID int64, h handlerFunc, spend func(http.ResponseWriter) bool) {
	rec := httptest.NewRecorder()
	h(rec, r, installationID)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:16]) + `"`
		rec.Header().Set("ETag", etag)
		if etagMatches(r.Header.Get("If-None-Match"), etag) {
			s.mu.Lock()
			b := s.rate[installationID]
			s.notModified[r.Pattern]++
			s.mu.Unlock()
			if b != nil {
				setRateHeaders(w, s.opts.RateLimit, b.remaining, b.resetAt)
			}
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if !spend(w) {
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = bytes.NewReader(body).WriteTo(w)
}

// etagMatches reports whether an If-None-Match header names etag (weak or strong, or *).
func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}

// NotModified returns how many conditional requests to an endpoint pattern were answered 304
// (and so cost no rate limit).
func (s *Server) NotModified(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notModified[endpoint]
}

// RateRemaining returns the installation's requests left in its current window, and whether it
// made any request yet.
func (s *Server) RateRemaining(installationID int64) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.rate[installationID]
	if !ok {
		return s.opts.RateLimit, false
	}
	return b.remaining, true
}
