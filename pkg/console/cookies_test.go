package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// TestCookiesAreSecureOutsideTheLocalFleet: on an https:// console the sign-in cookie is a
// __Host- cookie (Secure, host-only, path /), HttpOnly and SameSite=Lax, and the redirect to the
// identity provider carries a fresh state, nonce and S256 PKCE challenge.
func TestCookiesAreSecureOutsideTheLocalFleet(t *testing.T) {
	g := NewWithT(t)
	issuer, err := fakeoidc.Start(fakeoidc.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = issuer.Close() }()
	s := Settings{PublicURL: "https://console.example.com", IssuerURL: issuer.Issuer(), ClientID: "console", ClientSecret: "x",
		RoleName: "op", SessionKey: []byte(strings.Repeat("k", 32)), InventoryRefreshInterval: time.Second}
	g.Expect(s.Validate()).To(Succeed())
	a, err := NewAuthenticator(context.Background(), s, nil)
	g.Expect(err).NotTo(HaveOccurred())

	states := map[string]bool{}
	for range 2 {
		rec := httptest.NewRecorder()
		a.startLogin(rec, httptest.NewRequest(http.MethodGet, "/oidc/login?next=//evil.example.com", nil))
		g.Expect(rec.Code).To(Equal(http.StatusFound))
		cookies := rec.Result().Cookies()
		g.Expect(cookies).To(HaveLen(1))
		c := cookies[0]
		g.Expect(c.Name).To(Equal("__Host-hyperfleet_login"))
		g.Expect(c.Secure).To(BeTrue())
		g.Expect(c.HttpOnly).To(BeTrue())
		g.Expect(c.SameSite).To(Equal(http.SameSiteLaxMode))
		g.Expect(c.Path).To(Equal("/"))
		g.Expect(c.Domain).To(BeEmpty())
		var ls loginState
		g.Expect(a.seal.open(loginPurpose, c.Value, &ls)).To(Succeed())
		g.Expect(ls.Next).To(Equal("/"), "no open redirect after sign-in")
		loc, err := url.Parse(rec.Header().Get("Location"))
		g.Expect(err).NotTo(HaveOccurred())
		q := loc.Query()
		g.Expect(q.Get("state")).To(Equal(ls.State))
		g.Expect(q.Get("nonce")).To(Equal(ls.Nonce))
		g.Expect(q.Get("code_challenge_method")).To(Equal("S256"))
		g.Expect(q.Get("redirect_uri")).To(Equal("https://console.example.com/oidc/callback"))
		g.Expect(states).NotTo(HaveKey(ls.State))
		states[ls.State] = true
	}
}
