package fakegitlab

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Version and Revision are what GET /version reports: a GitLab release whose REST API the fake
// follows.
const (
	Version  = "17.8.1"
	Revision = "5f3a1e5c8b2"
)

// User is a GitLab user. Every user of the fake owns every group and project, so the runners
// it owns are all group and project runners.
type User struct {
	ID        int64
	Username  string
	Name      string
	Admin     bool
	CreatedAt time.Time
}

// AddUser creates a user (an administrator with admin); AddUserToken gives it tokens.
func (s *Server) AddUser(username string, admin bool) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addUserLocked(username, admin)
}

func (s *Server) addUserLocked(username string, admin bool) *User {
	id := s.newIDLocked()
	if username == "" {
		username = "user" + strconv.FormatInt(id, 10)
	}
	u := &User{ID: id, Username: username, Name: "User " + username, Admin: admin, CreatedAt: s.now()}
	s.users[id] = u
	return u
}

// AddUserToken creates a personal access token (glpat-...) of an existing user with the given
// scopes. A user's tokens share its rate limit budget.
func (s *Server) AddUserToken(userID int64, scopes ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil {
		panic("fake GitLab: no user " + strconv.FormatInt(userID, 10))
	}
	return s.addTokenLocked(u, scopes)
}

// AddToken creates a new user and a personal access token of it with the given scopes, and
// returns the token.
func (s *Server) AddToken(scopes ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addTokenLocked(s.addUserLocked("", false), scopes)
}

// AddAdminToken creates a new administrator and a token of it; instance runners need one.
func (s *Server) AddAdminToken(scopes ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addTokenLocked(s.addUserLocked("", true), scopes)
}

func (s *Server) addTokenLocked(u *User, scopes []string) string {
	tok := "glpat-" + randomHex(10)
	s.tokens[tok] = accessToken{scopes: slices.Clone(scopes), user: u.ID, admin: u.Admin}
	return tok
}

// RevokeToken revokes an access token: GitLab then answers 401 invalid_token.
func (s *Server) RevokeToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tokens[tok]; ok {
		t.revoked = true
		s.tokens[tok] = t
	}
}

// getCurrentUser is GET /user: the token's user. Administrators get the admin entity, which
// adds is_admin and a few fields (docs.gitlab.com/api/users/#get-the-current-user).
func (s *Server) getCurrentUser(w http.ResponseWriter, _ *http.Request, tok accessToken) {
	s.mu.Lock()
	u := *s.users[tok.user]
	s.mu.Unlock()
	out := map[string]any{
		"id": u.ID, "username": u.Username, "name": u.Name, "state": "active", "locked": false,
		"avatar_url": nil, "web_url": s.URL() + "/" + u.Username, "created_at": timeJSON(u.CreatedAt),
		"bio": "", "location": "", "public_email": nil, "organization": "", "job_title": "", "bot": false,
		"email": u.Username + "@example.com", "projects_limit": 100000, "can_create_group": true,
		"can_create_project": true, "two_factor_enabled": false, "external": false, "private_profile": false,
		"identities": []any{}, "last_sign_in_at": nil, "confirmed_at": timeJSON(u.CreatedAt),
	}
	if u.Admin {
		out["is_admin"] = true
		out["note"] = nil
		out["namespace_id"] = u.ID
		out["created_by"] = nil
	}
	writeJSON(w, http.StatusOK, out)
}

// getVersion is GET /version (docs.gitlab.com/api/version/).
func (s *Server) getVersion(w http.ResponseWriter, _ *http.Request, _ accessToken) {
	writeJSON(w, http.StatusOK, map[string]any{
		"version": Version, "revision": Revision, "enterprise": false,
		"kas": map[string]any{"enabled": false, "externalUrl": nil, "externalK8sProxyUrl": nil, "version": nil},
	})
}
