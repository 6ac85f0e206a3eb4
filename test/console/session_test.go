package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

var (
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	csrfAttr    = regexp.MustCompile(`data-csrf="([^"]+)"`)
)

// browser is a cookie-keeping HTTP client that follows redirects like a browser, recording them.
type browser struct {
	*http.Client
	redirects []*url.URL
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{}
	b.Client = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		b.redirects = append(b.redirects, req.URL)
		return nil
	}}
	return b
}

// get fetches u and returns the final response's status and body.
func (b *browser) get(t *testing.T, u string) (int, string, *url.URL) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Request.URL
}

// signIn goes through the identity provider's login page as user and stops before the callback is
// followed when stopAtCallback is set, returning the callback URL.
func (f *fixture) signIn(t *testing.T, b *browser, user fakeoidc.User, stopAtCallback bool) (status int, body string, callback *url.URL) {
	t.Helper()
	g := NewWithT(t)
	status, page, at := b.get(t, f.URL+"/")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(at.String()).To(HavePrefix(f.issuer.Issuer()+"/authorize"), "an anonymous browser is sent to sign in")
	g.Expect(page).To(ContainSubstring(`<label for="username">Username</label>`))
	form := url.Values{"username": {user.Username}, "password": {user.Password}}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	g.Expect(form.Get("code_challenge_method")).To(Equal("S256"), "the console uses PKCE")
	g.Expect(form.Get("nonce")).NotTo(BeEmpty())
	g.Expect(form.Get("state")).NotTo(BeEmpty())
	if stopAtCallback {
		noFollow := *b.Client
		noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := noFollow.PostForm(f.issuer.Issuer()+"/authorize", form)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusFound))
		cb, err := url.Parse(resp.Header.Get("Location"))
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, "", cb
	}
	resp, err := b.PostForm(f.issuer.Issuer()+"/authorize", form)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), nil
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&#43;", "+").Replace(s)
}

// TestBrowserSignInAndCSRF signs in through the login page (authorization code with PKCE), checks
// the session cookie's attributes, and plays a cross-site request: a change without the session's
// CSRF token is refused, with it the same change goes through.
func TestBrowserSignInAndCSRF(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	b := newBrowser(t)
	status, page, _ := f.signIn(t, b, alice, false)
	g.Expect(status).To(Equal(http.StatusOK), page)
	g.Expect(page).To(ContainSubstring("Alice Operator"))
	g.Expect(page).To(ContainSubstring("<h1>Inventory</h1>"))

	u, _ := url.Parse(f.URL)
	var session *http.Cookie
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "hyperfleet_session" {
			session = c
		}
	}
	g.Expect(session).NotTo(BeNil(), "a session cookie is set")
	m := csrfAttr.FindStringSubmatch(page)
	g.Expect(m).To(HaveLen(2))
	csrf := m[1]

	req := console.CreateVMRequest{Namespace: teamA, Name: "csrf-vm", Cluster: "pve", Template: "9000"}
	// A forged cross-site request carries the cookie but cannot read the token.
	r := f.send(t, b.Client, http.MethodPost, "/api/v1/vms", req, nil)
	g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
	g.Expect(r.problem(t).Detail).To(ContainSubstring("CSRF"))
	r = f.send(t, b.Client, http.MethodPost, "/api/v1/vms", req, func(h http.Header) { h.Set("X-CSRF-Token", "guessed") })
	g.Expect(r.Status).To(Equal(http.StatusForbidden))
	resp, err := b.PostForm(f.URL+"/vms/new", url.Values{"cluster": {teamA + "/pve"}, "name": {"csrf-form-vm"}, "template": {"9000"}})
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "a form without the CSRF token is refused")
	r = f.send(t, b.Client, http.MethodPost, "/api/v1/vms", req, func(h http.Header) { h.Set("X-CSRF-Token", csrf) })
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))

	// The raw Set-Cookie carries the attributes the jar hides.
	b2 := newBrowser(t)
	_, _, cb := f.signIn(t, b2, alice, true)
	noFollow := *b2.Client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = noFollow.Get(cb.String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	var set string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "hyperfleet_session=") {
			set = v
		}
	}
	g.Expect(set).To(And(ContainSubstring("HttpOnly"), ContainSubstring("SameSite=Lax"), ContainSubstring("Path=/")))
}

// TestCallbackRefusesForgedOrReplayedSignIn: a callback whose state is not this browser's, or a
// replayed callback (same code), never yields a session.
func TestCallbackRefusesForgedOrReplayedSignIn(t *testing.T) {
	f := startConsole(t)
	noFollow := func(b *browser) *http.Client {
		c := *b.Client
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &c
	}
	hasSession := func(b *browser) bool {
		u, _ := url.Parse(f.URL)
		for _, c := range b.Jar.Cookies(u) {
			if c.Name == "hyperfleet_session" {
				return true
			}
		}
		return false
	}

	t.Run("wrong state", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(t)
		_, _, cb := f.signIn(t, b, alice, true)
		q := cb.Query()
		q.Set("state", "attacker-chosen")
		cb.RawQuery = q.Encode()
		resp, err := noFollow(b).Get(cb.String())
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(hasSession(b)).To(BeFalse())
	})

	t.Run("callback without a sign-in in this browser (login CSRF)", func(t *testing.T) {
		g := NewWithT(t)
		attacker := newBrowser(t)
		_, _, cb := f.signIn(t, attacker, mallory, true)
		victim := newBrowser(t)
		resp, err := noFollow(victim).Get(cb.String())
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		g.Expect(hasSession(victim)).To(BeFalse(), "the victim is not signed in as the attacker")
	})

	t.Run("replayed code", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(t)
		_, _, cb := f.signIn(t, b, alice, true)
		u, _ := url.Parse(f.URL)
		saved := b.Jar.Cookies(u) // the sign-in cookie, kept by an attacker who copied it
		resp, err := noFollow(b).Get(cb.String())
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther), "the first callback signs in")

		// The same browser again: its sign-in cookie is spent.
		b2 := newBrowser(t)
		resp, err = noFollow(b2).Get(cb.String())
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))

		// With the copied sign-in cookie: the identity provider refuses the used code.
		b3 := newBrowser(t)
		b3.Jar.SetCookies(u, saved)
		resp, err = noFollow(b3).Get(cb.String())
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), string(body))
		g.Expect(string(body)).To(ContainSubstring("already used"))
		g.Expect(hasSession(b3)).To(BeFalse())
	})

	t.Run("a person without the role", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(t)
		status, _, _ := f.signIn(t, b, carol, false)
		g.Expect(status).To(Equal(http.StatusForbidden))
		g.Expect(hasSession(b)).To(BeFalse())
	})
}
