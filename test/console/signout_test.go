package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// signedIn is a browser session: the browser and what a thief copies of it.
type signedIn struct {
	browser *browser
	csrf    string
	// cookie is the session cookie as a thief who copied it replays it.
	cookie *http.Cookie
}

// signInCopied signs user in at f and returns the session with a copy of its cookie.
func (f *fixture) signInCopied(t *testing.T, user fakeoidc.User) signedIn {
	t.Helper()
	g := NewWithT(t)
	b := newBrowser(t)
	status, page, _ := f.signIn(t, b, user, false)
	g.Expect(status).To(Equal(http.StatusOK), page)
	m := csrfAttr.FindStringSubmatch(page)
	g.Expect(m).To(HaveLen(2))
	u, _ := url.Parse(f.URL)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "hyperfleet_session" {
			return signedIn{browser: b, csrf: m[1], cookie: &http.Cookie{Name: c.Name, Value: c.Value}}
		}
	}
	t.Fatal("no session cookie")
	return signedIn{}
}

// replay sends the copied cookie to a console, from another client, as a thief would.
func (s signedIn) replay(t *testing.T, at *fixture) int {
	t.Helper()
	return at.send(t, &http.Client{}, http.MethodGet, "/api/v1/vms?namespace="+teamA, nil, func(h http.Header) {
		h.Set("Cookie", s.cookie.String())
	}).Status
}

// signOut signs the browser out at a console (cookies are per host, so every replica gets them).
func (s signedIn) signOut(t *testing.T, at *fixture) (int, string) {
	t.Helper()
	resp, err := s.browser.PostForm(at.URL+"/oidc/logout", url.Values{"csrf_token": {s.csrf}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, resp.Request.URL.Path
}

// TestSignOutRevokesTheSessionOnEveryReplica plays a thief who copied alice's session cookie: it
// works on both replicas of the console while she is signed in, and is refused by both once she
// signs out (at once where she signed out, within seconds at the other). Two people signing out at
// two replicas at the same moment both stay signed out: neither sign-out overwrites the other.
func TestSignOutRevokesTheSessionOnEveryReplica(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	replica := startReplica(t, f)

	s := f.signInCopied(t, alice)
	g.Expect(s.replay(t, f)).To(Equal(http.StatusOK))
	g.Expect(s.replay(t, replica)).To(Equal(http.StatusOK), "replicas share sessions")

	status, at := s.signOut(t, f)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(at).To(Equal("/signed-out"))
	g.Expect(s.replay(t, f)).To(Equal(http.StatusUnauthorized), "the copied cookie outlived the sign-out")
	g.Eventually(func() int { return s.replay(t, replica) }, 15*time.Second, 250*time.Millisecond).
		Should(Equal(http.StatusUnauthorized), "the other replica still takes the copied cookie")
	// The thief's browser is sent to sign in, not shown alice's inventory.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r := f.send(t, noFollow, http.MethodGet, "/", nil, func(h http.Header) { h.Set("Cookie", s.cookie.String()) })
	g.Expect(r.Status).To(Equal(http.StatusFound))
	g.Expect(r.Header.Get("Location")).To(HavePrefix("/oidc/login"))

	// alice signs in again: a new session is a new session.
	again := f.signInCopied(t, alice)
	g.Expect(again.replay(t, replica)).To(Equal(http.StatusOK))

	t.Run("two sign-outs at once", func(t *testing.T) {
		g := NewWithT(t)
		a, v := f.signInCopied(t, alice), f.signInCopied(t, victor)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, out := range []struct {
			s  signedIn
			at *fixture
		}{{a, f}, {v, replica}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], _ = out.s.signOut(t, out.at)
			}()
		}
		wg.Wait()
		g.Expect(statuses).To(Equal([]int{http.StatusOK, http.StatusOK}))
		for _, s := range []signedIn{a, v} {
			for _, at := range []*fixture{f, replica} {
				g.Eventually(func() int { return s.replay(t, at) }, 15*time.Second, 250*time.Millisecond).Should(Equal(http.StatusUnauthorized))
			}
		}
	})

	// The list holds sessions only until they would have expired.
	cm := &corev1.ConfigMap{}
	ns, name, _ := strings.Cut(sessionRevocations, "/")
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	g.Expect(len(cm.Data)).To(BeNumerically(">=", 3))
	for id, until := range cm.Data {
		exp, err := time.Parse(time.RFC3339, until)
		g.Expect(err).NotTo(HaveOccurred(), id)
		g.Expect(exp).To(BeTemporally("~", time.Now().Add(time.Hour), 2*time.Minute), "fakeoidc's ID tokens live an hour")
	}
}
