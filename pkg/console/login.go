package console

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// refuse answers a failed sign-in: the UI's error page when the server set one, else a problem
// document.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, status int, title, detail string, fields []FieldError) {
	if a.errorPage != nil {
		a.errorPage(w, status, title, detail)
		return
	}
	writeProblem(w, r, status, title, detail, fields)
}

// maxNextLength bounds the page to return to after sign-in: it travels in the sign-in cookie,
// which a browser drops beyond 4 KiB.
const maxNextLength = 1024

// safeNext keeps the page to return to after sign-in on this console, or answers "/". Browsers read
// a Location leniently: they drop tabs and newlines and take a backslash for a slash, so "/\t/evil"
// or "/\\evil" lead to another host, and http.Redirect passes on unchanged what url.Parse refuses.
// So only printable ASCII without backslashes is read, only a path of this origin is kept (no
// scheme, host or user, one leading slash after cleaning), and the result is written anew from its
// parsed parts: what the browser gets is what was checked.
func safeNext(next string) string {
	if next == "" || len(next) > maxNextLength || !plainASCII(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	// The decoded path is checked too: "/%09/evil" is "/\t/evil" once a server or browser decodes it.
	if !plainASCII(u.Path) || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if strings.HasPrefix(clean, "//") {
		return "/"
	}
	return (&url.URL{Path: clean, RawQuery: u.Query().Encode()}).String()
}

// plainASCII says whether s is printable ASCII without spaces or backslashes.
func plainASCII(s string) bool {
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// startLogin sends the browser to the identity provider with a fresh state, nonce and PKCE
// verifier, kept in a sealed, short-lived cookie until the callback.
func (a *Authenticator) startLogin(w http.ResponseWriter, r *http.Request) {
	ls := loginState{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(r.URL.Query().Get("next"))}
	expires := time.Now().Add(loginLifetime)
	sealed, err := a.seal.seal(loginPurpose, expires, ls)
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "Sign-in failed", err.Error(), nil)
		return
	}
	http.SetCookie(w, a.cookie(a.loginCookieName(), sealed, expires))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, a.oauth.AuthCodeURL(ls.State, oidc.Nonce(ls.Nonce), oauth2.S256ChallengeOption(ls.Verifier)), http.StatusFound)
}

// callback finishes the sign-in: the state must match the sign-in cookie (which is spent at once,
// so a callback is never accepted twice), the code is exchanged with the PKCE verifier, and the ID
// token's signature, issuer, audience, expiry, nonce and role are checked.
func (a *Authenticator) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(a.loginCookieName())
	// Spend the sign-in cookie whatever happens next.
	http.SetCookie(w, a.cookie(a.loginCookieName(), "", time.Unix(0, 0)))
	var ls loginState
	if err != nil || a.seal.open(loginPurpose, c.Value, &ls) != nil {
		a.refuse(w, r, http.StatusBadRequest, "Sign-in refused", "no sign-in is in progress in this browser (or it expired): start again", nil)
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		a.refuse(w, r, http.StatusUnauthorized, "Sign-in refused", fmt.Sprintf("the identity provider said %s: %s", e, q.Get("error_description")), nil)
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(ls.State)) != 1 {
		a.refuse(w, r, http.StatusBadRequest, "Sign-in refused", "the state parameter does not match this browser's sign-in", nil)
		return
	}
	ctx := oidc.ClientContext(r.Context(), a.httpClient)
	tok, err := a.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(ls.Verifier))
	if err != nil {
		a.refuse(w, r, http.StatusUnauthorized, "Sign-in refused", "the identity provider did not accept the authorization code: "+err.Error(), nil)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		a.refuse(w, r, http.StatusUnauthorized, "Sign-in refused", "the identity provider returned no ID token", nil)
		return
	}
	p, idToken, err := a.verify(r.Context(), raw)
	if err != nil {
		status := http.StatusUnauthorized
		if !errors.Is(err, errUnauthenticated) {
			status = http.StatusForbidden
		}
		a.refuse(w, r, status, "Sign-in refused", err.Error(), nil)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(ls.Nonce)) != 1 {
		a.refuse(w, r, http.StatusUnauthorized, "Sign-in refused", "the ID token's nonce does not match this sign-in", nil)
		return
	}
	expires := idToken.Expiry
	if limit := time.Now().Add(maxSession); expires.After(limit) {
		expires = limit
	}
	s := session{ID: randomToken(), Principal: p, CSRF: randomToken(), Expires: expires}
	sealed, err := a.seal.seal(sessionPurpose, expires, s)
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "Sign-in failed", err.Error(), nil)
		return
	}
	http.SetCookie(w, a.cookie(a.sessionCookieName(), sealed, expires))
	// Checked again: a sign-in cookie sealed by an older console may carry a page it let through.
	http.Redirect(w, r, safeNext(ls.Next), http.StatusSeeOther)
}

// logout ends the browser session: it is listed as signed out, so a copy of its cookie is refused
// too, then the browser's cookie is cleared. When the list cannot be written the cookie is kept, so
// the person can sign out again rather than leave behind a session that still works.
func (a *Authenticator) logout(w http.ResponseWriter, r *http.Request, au authenticated) {
	if au.Session != nil && a.revocations != nil {
		if err := a.revocations.revoke(r.Context(), au.Session.ID, au.Session.Expires); err != nil {
			a.refuse(w, r, http.StatusServiceUnavailable, "Sign-out failed",
				"the console could not record the sign-out, so this session would stay valid: try again ("+err.Error()+")", nil)
			return
		}
	}
	http.SetCookie(w, a.cookie(a.sessionCookieName(), "", time.Unix(0, 0)))
	http.Redirect(w, r, "/signed-out", http.StatusSeeOther)
}
