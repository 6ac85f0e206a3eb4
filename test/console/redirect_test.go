package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
)

// TestBrowserSignInStaysOnTheConsole plays an attacker who sends a person a sign-in link whose
// page to return to is another server, spelt so that a browser reads it as a host: "/<TAB>/host"
// (the browser drops the tab) and "/<TAB>\host" (it also takes the backslash for a slash). Debian's
// Chromium follows the link and signs in through the identity provider's login page; it must end
// on the console, and the other server must never be asked for anything.
func TestBrowserSignInStaysOnTheConsole(t *testing.T) {
	f := startConsole(t)
	var visited atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		visited.Store(true)
		_, _ = w.Write([]byte("<!doctype html><title>Not the console</title><h1>Not the console</h1>"))
	}))
	defer other.Close()
	otherHost := strings.TrimPrefix(other.URL, "http://")

	for _, tc := range []struct{ name, next string }{
		{"tab then slash", "/\t/" + otherHost},
		{"tab then backslash", "/\t\\" + otherHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := newBrowserContext(t)
			visited.Store(false)
			link := f.URL + "/oidc/login?next=" + url.QueryEscape(tc.next)
			g.Expect(chromedp.Do(ctx,
				chromedp.Navigate(link),
				chromedp.WaitVisible(chromedp.ID("username")),
				chromedp.SendKeys(chromedp.ID("username"), alice.Username),
				chromedp.SendKeys(chromedp.ID("password"), alice.Password+kb.Enter),
			)).To(Succeed())
			var at string
			g.Eventually(func(g Gomega) {
				loc, err := chromedp.Run(ctx, chromedp.Location())
				g.Expect(err).NotTo(HaveOccurred())
				at = loc
				g.Expect(loc).NotTo(HavePrefix(f.issuer.Issuer()), "still at the identity provider")
				g.Expect(loc).NotTo(ContainSubstring("/oidc/"), "still signing in")
				ready, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ready).To(Equal("complete"))
			}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
			g.Expect(at).To(HavePrefix(f.URL+"/"), "the browser ended on the console")
			g.Expect(visited.Load()).To(BeFalse(), "the other server was visited")
			title, err := chromedp.Run(ctx, chromedp.Title())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(title).NotTo(ContainSubstring("Not the console"))
		})
	}
}
