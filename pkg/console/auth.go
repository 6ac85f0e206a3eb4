package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Cookie purposes and lifetimes.
const (
	sessionPurpose = "session"
	loginPurpose   = "login"
	loginLifetime  = 10 * time.Minute
	// maxSession bounds a session even when the identity provider issues long-lived ID tokens.
	maxSession = 12 * time.Hour
	csrfHeader = "X-CSRF-Token"
	csrfField  = "csrf_token"
)

// Errors of authentication, each mapped to its HTTP status.
var (
	// errUnauthenticated: no credentials or invalid ones (401).
	errUnauthenticated = errors.New("sign in first: send a bearer token from the identity provider or a session cookie")
	// errBadCSRF: a browser session's change came without its CSRF token (403).
	errBadCSRF = errors.New("the request lacks this session's CSRF token")
)

// session is what the session cookie holds.
type session struct {
	// ID names the session in the list of signed-out sessions.
	ID        string    `json:"id"`
	Principal Principal `json:"principal"`
	CSRF      string    `json:"csrf"`
	Expires   time.Time `json:"expires"`
}

// loginState is what the sign-in cookie holds between the redirect to the identity provider and
// the callback.
type loginState struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Next     string `json:"next"`
}

// Authenticator verifies bearer tokens and runs the browser sign-in.
type Authenticator struct {
	settings Settings
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	seal     *sealer
	// httpClient talks to the identity provider.
	httpClient *http.Client
	// errorPage renders a refused sign-in for a person; nil answers with problem documents.
	errorPage func(w http.ResponseWriter, status int, title, detail string)
	// revocations lists the sessions signed out before they expire; nil keeps no list, and a
	// signed-out session's cookie then works until it expires.
	revocations *revocations
}

// NewAuthenticator discovers the issuer and prepares token verification against its JWKS.
func NewAuthenticator(ctx context.Context, s Settings, httpClient *http.Client) (*Authenticator, error) {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 15 * time.Second}
		if s.IssuerRoots != nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: s.IssuerRoots, MinVersion: tls.VersionTLS12}
			httpClient.Transport = tr
		}
	}
	ctx = oidc.ClientContext(ctx, httpClient)
	provider, err := oidc.NewProvider(ctx, s.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discovering OIDC issuer %s: %w", s.IssuerURL, err)
	}
	seal, err := newSealer(s.SessionKey)
	if err != nil {
		return nil, err
	}
	return &Authenticator{
		settings: s,
		// ClientID makes the verifier check aud; signature, issuer and expiry are always checked.
		verifier: provider.Verifier(&oidc.Config{ClientID: s.ClientID, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256, oidc.PS256}}),
		oauth: oauth2.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, Endpoint: provider.Endpoint(),
			RedirectURL: s.RedirectURL(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}},
		seal:       seal,
		httpClient: httpClient,
	}, nil
}

// verify checks a raw token and returns its principal: an invalid token is errUnauthenticated, a
// valid one without the role ErrNoRole.
func (a *Authenticator) verify(ctx context.Context, raw string) (Principal, *oidc.IDToken, error) {
	tok, err := a.verifier.Verify(oidc.ClientContext(ctx, a.httpClient), raw)
	if err != nil {
		return Principal{}, nil, fmt.Errorf("%w: %v", errUnauthenticated, err)
	}
	claims := map[string]any{}
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, nil, fmt.Errorf("%w: %v", errUnauthenticated, err)
	}
	p, err := a.settings.principalFromClaims(claims)
	return p, tok, err
}

// authenticated is a request's verified caller.
type authenticated struct {
	Principal Principal
	// Session is set for browser sessions (nil for bearer tokens).
	Session *session
}

// authenticate finds the caller of r: a bearer token first, else the session cookie.
func (a *Authenticator) authenticate(r *http.Request) (authenticated, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, raw, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
			return authenticated{}, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", errUnauthenticated)
		}
		p, _, err := a.verify(r.Context(), strings.TrimSpace(raw))
		return authenticated{Principal: p}, err
	}
	c, err := r.Cookie(a.sessionCookieName())
	if err != nil {
		return authenticated{}, errUnauthenticated
	}
	var s session
	// A session without an ID (sealed by an older console) could not be signed out: sign in again.
	if err := a.seal.open(sessionPurpose, c.Value, &s); err != nil || time.Now().After(s.Expires) || s.ID == "" {
		return authenticated{}, errUnauthenticated
	}
	if a.revocations != nil {
		revoked, err := a.revocations.isRevoked(r.Context(), s.ID)
		if err != nil {
			return authenticated{}, err
		}
		if revoked {
			return authenticated{}, fmt.Errorf("%w: this session was signed out", errUnauthenticated)
		}
	}
	return authenticated{Principal: s.Principal, Session: &s}, nil
}

// checkCSRF requires a browser session's changes to carry its CSRF token, in the header (API calls
// from the UI's scripts) or the form (the UI's forms). Bearer tokens are not sent by browsers on
// their own, so they need none.
func checkCSRF(r *http.Request, au authenticated) error {
	if au.Session == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(au.Session.CSRF)) != 1 {
		return errBadCSRF
	}
	return nil
}

func (a *Authenticator) sessionCookieName() string {
	if a.settings.InsecureCookies {
		return "hyperfleet_session"
	}
	// __Host- cookies are only accepted when Secure, host-only and for path /.
	return "__Host-hyperfleet_session"
}

func (a *Authenticator) loginCookieName() string {
	if a.settings.InsecureCookies {
		return "hyperfleet_login"
	}
	return "__Host-hyperfleet_login"
}

func (a *Authenticator) cookie(name, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: !a.settings.InsecureCookies,
		SameSite: http.SameSiteLaxMode, Expires: expires}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("console: reading random bytes: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
