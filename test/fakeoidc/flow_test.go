package fakeoidc

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
)

// TestCodeIsSingleUseAndBoundToItsVerifier: the token endpoint gives tokens only for the PKCE
// verifier the code was issued for, and only once.
func TestCodeIsSingleUseAndBoundToItsVerifier(t *testing.T) {
	g := NewWithT(t)
	redirect := "http://127.0.0.1:1/cb"
	s, err := Start(Options{Users: []User{{Username: "u", Password: "p", Email: "u@x", Roles: []string{"r"}}},
		Clients: []Client{{ID: "c", Secret: "s", RedirectURIs: []string{redirect}}}})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = s.Close() }()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	verifier := oauth2.GenerateVerifier()
	code := func(password string) (int, string) {
		resp, err := noFollow.PostForm(s.Issuer()+"/authorize", url.Values{"client_id": {"c"}, "redirect_uri": {redirect},
			"response_type": {"code"}, "scope": {"openid"}, "state": {"st"}, "code_challenge_method": {"S256"},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "username": {"u"}, "password": {password}})
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return resp.StatusCode, loc.Query().Get("code")
	}
	status, _ := code("wrong")
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	status, c := code("p")
	g.Expect(status).To(Equal(http.StatusFound))
	exchange := func(code, verifier string) (int, map[string]any) {
		resp, err := http.PostForm(s.Issuer()+"/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {redirect}, "client_id": {"c"}, "client_secret": {"s"}, "code_verifier": {verifier}})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	st, body := exchange(c, oauth2.GenerateVerifier())
	g.Expect(st).To(Equal(http.StatusBadRequest))
	g.Expect(body["error"]).To(Equal("invalid_grant"))
	// The failed attempt spent the code: a stolen code cannot be tried against many verifiers.
	st, body = exchange(c, verifier)
	g.Expect(st).To(Equal(http.StatusBadRequest))
	g.Expect(body["error_description"]).To(ContainSubstring("already used"))

	_, c = code("p")
	st, body = exchange(c, verifier)
	g.Expect(st).To(Equal(http.StatusOK))
	g.Expect(body["id_token"]).NotTo(BeEmpty())

	resp, err := http.Get(s.Issuer() + "/authorize?client_id=c&redirect_uri=" + url.QueryEscape(redirect) + "&response_type=code&scope=openid")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "PKCE is required")
}
