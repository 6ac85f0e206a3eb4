package fakeoidc

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// authorizeParams are the authorization request's parameters the login page carries along.
var authorizeParams = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "nonce",
	"code_challenge", "code_challenge_method"}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · HyperFleet test identity provider</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#eef1f5;margin:0;color:#1d2733}
main{max-width:22rem;margin:8vh auto;background:#fff;border-radius:10px;box-shadow:0 2px 12px #0002;padding:2rem}
h1{font-size:1.3rem;margin:0 0 .3rem} p{color:#5b6775;margin:0 0 1.2rem;font-size:.9rem}
label{display:block;font-weight:600;margin:.8rem 0 .3rem;font-size:.9rem}
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.55rem;border:1px solid #b9c2cc;border-radius:6px;font-size:1rem}
button{margin-top:1.3rem;width:100%;padding:.65rem;border:0;border-radius:6px;background:#2457c5;color:#fff;font-size:1rem;font-weight:600}
.error{color:#b3261e;font-weight:600}
</style></head>
<body><main>
<h1>Sign in</h1><p>Test identity provider for {{.Client}}</p>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/authorize">
{{range $k, $v := .Params}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
<label for="username">Username</label><input id="username" name="username" type="text" autocomplete="username" autofocus required>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form></main></body></html>`))

// checkAuthorizeRequest validates an authorization request; the error is shown, never redirected
// to an unregistered redirect URI.
func (s *Server) checkAuthorizeRequest(v url.Values) (string, bool) {
	c, ok := s.client(v.Get("client_id"))
	if !ok {
		return "unknown client_id", false
	}
	if !slices.Contains(c.RedirectURIs, v.Get("redirect_uri")) {
		return "redirect_uri is not registered for this client", false
	}
	if v.Get("response_type") != "code" {
		return "response_type must be code", false
	}
	if v.Get("code_challenge_method") != "S256" || v.Get("code_challenge") == "" {
		return "PKCE is required: code_challenge with code_challenge_method S256", false
	}
	if !slices.Contains(strings.Fields(v.Get("scope")), "openid") {
		return "scope must include openid", false
	}
	return "", true
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if msg, ok := s.checkAuthorizeRequest(q); !ok {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	s.renderLogin(w, http.StatusOK, q, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, status int, q url.Values, errMsg string) {
	params := map[string]string{}
	for _, k := range authorizeParams {
		params[k] = q.Get(k)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, map[string]any{"Client": q.Get("client_id"), "Params": params, "Error": errMsg})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	v := r.PostForm
	if msg, ok := s.checkAuthorizeRequest(v); !ok {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	u, ok := s.User(v.Get("username"))
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(v.Get("password"))) != 1 {
		s.renderLogin(w, http.StatusUnauthorized, v, "Wrong username or password.")
		return
	}
	code := randomString(16)
	s.mu.Lock()
	s.codes[code] = &grant{user: u, clientID: v.Get("client_id"), redirectURI: v.Get("redirect_uri"),
		nonce: v.Get("nonce"), codeChallenge: v.Get("code_challenge"), expires: time.Now().Add(time.Minute)}
	s.mu.Unlock()
	target, _ := url.Parse(v.Get("redirect_uri"))
	q := target.Query()
	q.Set("code", code)
	if st := v.Get("state"); st != "" {
		q.Set("state", st)
	}
	target.RawQuery = q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	clientID, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 2.3.1: the client credentials are form-encoded before going into the header.
		clientID, _ = url.QueryUnescape(clientID)
		secret, _ = url.QueryUnescape(secret)
	} else {
		clientID, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c, ok := s.client(clientID)
	if !ok || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code is supported")
		return
	}
	code := r.PostForm.Get("code")
	s.mu.Lock()
	g, found := s.codes[code]
	replay := s.redeemed[code]
	// A code is single-use whatever happens next.
	delete(s.codes, code)
	if found {
		s.redeemed[code] = true
	}
	s.mu.Unlock()
	switch {
	case replay:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "authorization code was already used")
		return
	case !found || time.Now().After(g.expires):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or expired authorization code")
		return
	case g.clientID != clientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code was issued to another client")
		return
	case g.redirectURI != r.PostForm.Get("redirect_uri"):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match the authorization request")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.codeChallenge)) != 1 {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match code_challenge")
		return
	}
	idToken, err := s.Token(g.user, clientID, TokenOptions{Nonce: g.nonce})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	access, err := s.Token(g.user, clientID, TokenOptions{})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "id_token": idToken,
		"token_type": "Bearer", "expires_in": int(s.opts.TokenLifetime.Seconds())})
}
