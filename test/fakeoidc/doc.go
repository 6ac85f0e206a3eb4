// Package fakeoidc is an OpenID Connect issuer for tests and the local fleet: discovery, a JWKS, an
// HTML login page, the authorization code flow with PKCE (S256) and single-use codes, and a token
// endpoint, served on loopback with configurable users, groups and roles. Tests also mint tokens
// directly, including the bad ones an attacker would present (expired, for another audience,
// signed by another key).
package fakeoidc
