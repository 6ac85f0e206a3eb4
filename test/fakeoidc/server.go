package fakeoidc

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// User is a person who can sign in.
type User struct {
	// Username and Password are what the login page asks for.
	Username string
	Password string
	// Email is the token's email claim, the name the console impersonates.
	Email string
	// EmailUnverified makes email_verified false: the provider took the address as typed in, as
	// a sign-up page does before the mailbox's owner confirms it.
	EmailUnverified bool
	// Name is the display name.
	Name string
	// Groups and Roles become the groups and role claims.
	Groups []string
	Roles  []string
}

// Client is a registered OAuth client.
type Client struct {
	ID     string
	Secret string
	// RedirectURIs are the exact redirect URIs the client may use.
	RedirectURIs []string
}

// Options configure a Server.
type Options struct {
	Users   []User
	Clients []Client
	// RoleClaim names the claim that carries roles; default "roles" (as Microsoft Entra ID does).
	RoleClaim string
	// TokenLifetime of issued tokens; default one hour.
	TokenLifetime time.Duration
	// Addr to listen on; default 127.0.0.1:0.
	Addr string
	// TLS serves HTTPS with a generated self-signed certificate for Addr's IP (see CACertPEM), as
	// an identity provider on a company's private CA does.
	TLS bool
}

// Server is a running issuer.
type Server struct {
	opts     Options
	key      *rsa.PrivateKey
	keyID    string
	listener net.Listener
	srv      *http.Server
	issuer   string
	caPEM    []byte

	mu    sync.Mutex
	codes map[string]*grant
	// redeemed remembers used codes, so a replay is told apart from a code never issued.
	redeemed map[string]bool
}

// grant is an issued authorization code with what it was issued for.
type grant struct {
	user          User
	clientID      string
	redirectURI   string
	nonce         string
	codeChallenge string
	expires       time.Time
}

// Start serves an issuer on loopback until Close.
func Start(opts Options) (*Server, error) {
	if opts.RoleClaim == "" {
		opts.RoleClaim = "roles"
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = time.Hour
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	l, url, caPEM, err := fakeserver.Listen(opts.Addr, opts.TLS, "fakeoidc")
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, key: key, keyID: randomString(8), listener: l, caPEM: caPEM,
		issuer: url, codes: map[string]*grant{}, redeemed: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", s.discovery)
	mux.HandleFunc("GET /keys", s.jwks)
	mux.HandleFunc("GET /authorize", s.loginPage)
	mux.HandleFunc("POST /authorize", s.login)
	mux.HandleFunc("POST /token", s.token)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Issuer is the issuer URL (also the discovery base).
func (s *Server) Issuer() string { return s.issuer }

// CACertPEM is the certificate clients trust with Options.TLS; nil without.
func (s *Server) CACertPEM() []byte { return s.caPEM }

// Close stops the issuer.
func (s *Server) Close() error { return s.srv.Close() }

// AddClient registers another client (the local fleet learns the console's address after the
// issuer started).
func (s *Server) AddClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Clients = append(s.opts.Clients, c)
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                s.issuer,
		"authorization_endpoint":                s.issuer + "/authorize",
		"token_endpoint":                        s.issuer + "/token",
		"jwks_uri":                              s.issuer + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"claims_supported":                      []string{"sub", "email", "name", "groups", s.opts.RoleClaim},
	})
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &s.key.PublicKey, KeyID: s.keyID, Algorithm: string(jose.RS256), Use: "sig"}}})
}

// TokenOptions change a minted token, mostly to make it bad in one way.
type TokenOptions struct {
	// Audience replaces the client ID as aud.
	Audience string
	// Issuer replaces the issuer.
	Issuer string
	// ExpiresIn replaces the lifetime; negative for a token that already expired.
	ExpiresIn time.Duration
	// SigningKey signs with another key (an attacker's) instead of the issuer's.
	SigningKey *rsa.PrivateKey
	// Nonce is the nonce claim.
	Nonce string
	// Extra claims are added, replacing the user's on a clash.
	Extra map[string]any
}

// Token mints a token for user and client clientID as the token endpoint would.
func (s *Server) Token(user User, clientID string, o TokenOptions) (string, error) {
	now := time.Now()
	lifetime := s.opts.TokenLifetime
	if o.ExpiresIn != 0 {
		lifetime = o.ExpiresIn
	}
	aud := clientID
	if o.Audience != "" {
		aud = o.Audience
	}
	iss := s.issuer
	if o.Issuer != "" {
		iss = o.Issuer
	}
	claims := map[string]any{
		"iss": iss, "sub": "user-" + user.Username, "aud": aud,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(lifetime).Unix(),
		"email": user.Email, "email_verified": !user.EmailUnverified, "name": user.Name, "preferred_username": user.Username,
		"groups": nonNil(user.Groups), s.opts.RoleClaim: nonNil(user.Roles),
	}
	if o.Nonce != "" {
		claims["nonce"] = o.Nonce
	}
	for k, v := range o.Extra {
		claims[k] = v
	}
	key, kid := s.key, s.keyID
	if o.SigningKey != nil {
		key = o.SigningKey
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// User returns the configured user named username.
func (s *Server) User(username string) (User, bool) {
	for _, u := range s.opts.Users {
		if u.Username == username {
			return u, true
		}
	}
	return User{}, false
}

func (s *Server) client(id string) (Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.opts.Clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("fakeoidc: reading random bytes: %v", err))
	}
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError answers as RFC 6749 section 5.2 says.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}
