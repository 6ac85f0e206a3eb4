package fakegithub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// maxJWTLifetime is GitHub's limit on an App JWT's exp - iat.
const maxJWTLifetime = 10 * time.Minute

// verifyAppJWT checks an App JWT the way GitHub does: RS256 signed by the App key, issued by the
// App ID, not expired, not issued in the future (60 s skew) and living at most ten minutes.
func (s *Server) verifyAppJWT(token string) error {
	if token == "" {
		return errors.New("missing bearer token")
	}
	claims := &jwt.RegisteredClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) {
		return &s.appKey.PublicKey, nil
	}); err != nil {
		return err
	}
	if claims.Issuer != strconv.FormatInt(s.opts.AppID, 10) {
		return fmt.Errorf("'Issuer' claim (%q) does not match the App ID", claims.Issuer)
	}
	if claims.IssuedAt == nil || claims.ExpiresAt == nil {
		return errors.New("'iat' and 'exp' claims are required")
	}
	now := s.now()
	iat, exp := claims.IssuedAt.Time, claims.ExpiresAt.Time
	switch {
	case !exp.After(now):
		return errors.New("'Expiration time' claim ('exp') is in the past")
	case iat.After(now.Add(time.Minute)):
		return errors.New("'Issued at' claim ('iat') must be an Integer representing a time in the past")
	case exp.Sub(iat) > maxJWTLifetime:
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	}
	return nil
}

// checkInstallationToken returns the installation a token belongs to, or the 401 GitHub answers
// for unknown, revoked and expired tokens.
func (s *Server) checkInstallationToken(token string) (int64, int, string) {
	if token == "" {
		return 0, http.StatusUnauthorized, "Requires authentication"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[token]
	if !ok || t.revoked || !s.now().Before(t.expiresAt) {
		return 0, http.StatusUnauthorized, "Bad credentials"
	}
	return t.installationID, 0, ""
}

// mayAccess reports whether an installation's token may act on scope ("org" or "owner/name").
func (s *Server) mayAccess(installationID int64, scope string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.installations[strings.ToLower(scopeOwner(scope))]
	return ok && inst.ID == installationID
}

func (s *Server) denyUnlessAccess(w http.ResponseWriter, installationID int64, scope string) bool {
	if s.mayAccess(installationID, scope) {
		return false
	}
	writeError(w, http.StatusForbidden, "Resource not accessible by integration")
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) createAccessToken(w http.ResponseWriter, r *http.Request, _ int64) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	var found *Installation
	for _, inst := range s.installations {
		if inst.ID == id {
			found = inst
		}
	}
	if found == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	token := "ghs_" + randomHex(18)
	expires := s.now().Add(s.opts.TokenTTL).UTC().Truncate(time.Second)
	s.tokens[token] = &installToken{installationID: id, expiresAt: expires}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                token,
		"expires_at":           expires.Format(time.RFC3339),
		"permissions":          map[string]string{"actions": "read", "administration": "write", "organization_self_hosted_runners": "write", "metadata": "read"},
		"repository_selection": "all",
	})
}

func (s *Server) installationJSON(inst *Installation) map[string]any {
	return map[string]any{
		"id":                   inst.ID,
		"app_id":               s.opts.AppID,
		"account":              map[string]any{"login": inst.Account, "type": "Organization"},
		"target_type":          "Organization",
		"repository_selection": "all",
		"access_tokens_url":    fmt.Sprintf("%s/app/installations/%d/access_tokens", s.URL(), inst.ID),
	}
}

func (s *Server) listAppInstallations(w http.ResponseWriter, r *http.Request, _ int64) {
	s.mu.Lock()
	list := make([]map[string]any, 0, len(s.installations))
	ids := make([]*Installation, 0, len(s.installations))
	for _, inst := range s.installations {
		ids = append(ids, inst)
	}
	sort.Slice(ids, func(i, k int) bool { return ids[i].ID < ids[k].ID })
	for _, inst := range ids {
		list = append(list, s.installationJSON(inst))
	}
	s.mu.Unlock()
	start, end := s.page(w, r, len(list))
	writeJSON(w, http.StatusOK, list[start:end])
}

func (s *Server) findInstallation(w http.ResponseWriter, account string) {
	s.mu.Lock()
	inst, ok := s.installations[strings.ToLower(account)]
	var body map[string]any
	if ok {
		body = s.installationJSON(inst)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) getRepoInstallation(w http.ResponseWriter, r *http.Request, _ int64) {
	s.findInstallation(w, r.PathValue("owner"))
}

func (s *Server) getOrgInstallation(w http.ResponseWriter, r *http.Request, _ int64) {
	s.findInstallation(w, r.PathValue("org"))
}

// listInstallationRepos lists the repositories the fake knows (from jobs, registrations and
// AddRepository) on the token's account; the App is installed on "all" repositories.
func (s *Server) listInstallationRepos(w http.ResponseWriter, r *http.Request, installationID int64) {
	s.mu.Lock()
	var names []string
	for _, full := range s.repos {
		if inst, ok := s.installations[strings.ToLower(scopeOwner(full))]; ok && inst.ID == installationID {
			names = append(names, full)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	start, end := s.page(w, r, len(names))
	repos := make([]map[string]any, 0, end-start)
	for _, full := range names[start:end] {
		repos = append(repos, repoJSON(full))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(names), "repository_selection": "all", "repositories": repos})
}

func repoJSON(full string) map[string]any {
	owner, name, _ := splitRepo(full)
	return map[string]any{
		"name": name, "full_name": full,
		"owner": map[string]any{"login": owner, "type": "Organization"},
	}
}
