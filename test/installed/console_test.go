package installed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"

	headless "github.com/hyperfleet-io/hyperfleet/test/browser"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// consoleNodePort is where the test exposes the chart's console Service, at the node's bridge
// address, for its stand-in Ingress.
const consoleNodePort = "30480"

// consoleWorld is what a console installed by the chart needs around it: an identity provider
// on a private CA, and an Ingress that ends TLS in front of the console's Service.
type consoleWorld struct {
	issuer    *fakeoidc.Server
	publicURL string
	ingressCA []byte
	user      fakeoidc.User
}

// startConsoleWorld starts, on the node's bridge address (where pods reach the host), an OIDC
// issuer over HTTPS with a self-signed CA, and a TLS-terminating reverse proxy to the console's
// NodePort standing in for the chart's Ingress (the node has no Ingress controller).
func startConsoleWorld(t *testing.T) *consoleWorld {
	t.Helper()
	gw := theNode.Gateway.String()
	w := &consoleWorld{user: fakeoidc.User{Username: "alice", Password: "alice-pw", Email: "alice@example.com",
		Name: "Alice Operator", Roles: []string{"HyperFleet.Operator"}}}
	var err error
	if w.issuer, err = fakeoidc.Start(fakeoidc.Options{Addr: net.JoinHostPort(gw, "0"), TLS: true, Users: []fakeoidc.User{w.user}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.issuer.Close() })

	l, publicURL, ingressCA, err := fakeserver.Listen(net.JoinHostPort(gw, "0"), true, "console-ingress")
	if err != nil {
		t.Fatal(err)
	}
	backend := &url.URL{Scheme: "http", Host: net.JoinHostPort(gw, consoleNodePort)}
	ingress := &http.Server{Handler: httputil.NewSingleHostReverseProxy(backend), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ingress.Serve(l) }()
	t.Cleanup(func() { _ = ingress.Close() })
	w.publicURL, w.ingressCA = publicURL, ingressCA
	w.issuer.AddClient(fakeoidc.Client{ID: "hyperfleet-console", Secret: "console-client-secret",
		RedirectURIs: []string{publicURL + "/oidc/callback"}})
	return w
}

// helmValues are the chart settings that enable the console against this world.
func (w *consoleWorld) helmValues(t *testing.T) []string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "issuer-ca.pem")
	if err := os.WriteFile(ca, w.issuer.CACertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{
		"--set", "console.enabled=true", "--set", "console.publicURL=" + w.publicURL,
		"--set", "console.oidc.issuerURL=" + w.issuer.Issuer(), "--set", "console.oidc.clientID=hyperfleet-console",
		"--set", "console.oidc.roleName=HyperFleet.Operator", "--set-file", "console.oidc.issuerCA=" + ca,
		"--set", "console.clientSecret=console-client-secret", "--set", "console.sessionKey=" + randomHex(t, 24),
		"--set", "console.ingress.enabled=false",
	}
}

// exposeConsole gives the chart's console pods a NodePort Service for the stand-in Ingress.
func exposeConsole(t *testing.T, namespace, instance string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: console-ingress-backend
  namespace: %s
spec:
  type: NodePort
  selector:
    app.kubernetes.io/name: hyperfleet
    app.kubernetes.io/instance: %s
    app.kubernetes.io/component: console
  ports:
  - port: 80
    targetPort: http
    nodePort: %s
`, namespace, instance, consoleNodePort)), "apply", "-f", "-")
}

// signIn is a person at the console the chart installed: the console sends the browser to the
// identity provider's login page, they sign in with the keyboard, and the console greets them by
// name. The console in its pod reached the issuer over TLS it verified with the chart's
// console.oidc.issuerCA, both for discovery and for the code exchange.
func (w *consoleWorld) signIn(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	// The browser meets the stand-in Ingress's and the issuer's self-signed certificates.
	ctx := headless.NewContext(t, chromedp.Flag("ignore-certificate-errors", true))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	g.Eventually(func() error {
		resp, err := (&http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}, Transport: w.ingressTransport(t)}).Get(w.publicURL + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz through the ingress: %s", resp.Status)
		}
		return nil
	}, time.Minute, time.Second).Should(Succeed(), "the console answers through its Service")
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(w.publicURL+"/"),
		chromedp.WaitVisible(chromedp.ID("username")),
	)).To(Succeed())
	loc, err := chromedp.Run(ctx, chromedp.Location())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loc).To(HavePrefix(w.issuer.Issuer()+"/authorize"), "the console sends the browser to the identity provider")
	g.Expect(chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("username"), w.user.Username),
		chromedp.SendKeys(chromedp.ID("password"), w.user.Password+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("header .who")),
	)).To(Succeed())
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("header .who")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who).To(ContainSubstring(w.user.Name))
	loc, err = chromedp.Run(ctx, chromedp.Location())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loc).To(HavePrefix(w.publicURL), "back at the console, signed in")
}

// ingressTransport trusts the stand-in Ingress's certificate, as the browser is told to.
func (w *consoleWorld) ingressTransport(t *testing.T) *http.Transport {
	t.Helper()
	tr, err := fakeserver.TrustingTransport(w.ingressCA)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
