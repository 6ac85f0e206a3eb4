package hvsim

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/go-ntlmssp"
	"github.com/masterzen/winrm"
	. "github.com/onsi/gomega"
)

// ntlmConn is one client connection speaking NTLM by hand with go-ntlmssp's message functions.
type ntlmConn struct {
	t      testing.TB
	s      *Server
	client *http.Client
}

func newNTLMConn(t testing.TB, s *Server) *ntlmConn {
	tr := trusting(t, s).Transport.(*http.Transport)
	tr.MaxConnsPerHost = 1 // one TCP connection, as NTLM needs
	t.Cleanup(tr.CloseIdleConnections)
	return &ntlmConn{t: t, s: s, client: &http.Client{Transport: tr}}
}

func (c *ntlmConn) post(auth string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.s.URL(), strings.NewReader(winrm.NewOpenShellRequest(c.s.URL(), nil).String()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", soapCT)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// challenge sends a NEGOTIATE message and returns the server's CHALLENGE.
func (c *ntlmConn) challenge() []byte {
	c.t.Helper()
	neg, err := ntlmssp.NewNegotiateMessage("", "")
	if err != nil {
		c.t.Fatal(err)
	}
	resp := c.post("Negotiate " + base64.StdEncoding.EncodeToString(neg))
	if resp.StatusCode != http.StatusUnauthorized {
		c.t.Fatalf("negotiate: status %d", resp.StatusCode)
	}
	scheme, token, _ := strings.Cut(resp.Header.Get("WWW-Authenticate"), " ")
	if scheme != "Negotiate" {
		c.t.Fatalf("challenge scheme %q", scheme)
	}
	msg, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		c.t.Fatal(err)
	}
	return msg
}

func authenticate(t testing.TB, challenge []byte, user, password string) string {
	t.Helper()
	msg, err := ntlmssp.ProcessChallenge(challenge, user, password)
	if err != nil {
		t.Fatal(err)
	}
	return "Negotiate " + base64.StdEncoding.EncodeToString(msg)
}

func TestNTLMAuthenticatesTheConnection(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, DisableBasic: true})
	a := newNTLMConn(t, s)
	g.Expect(a.post("").StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(a.post(authenticate(t, a.challenge(), strings.ToUpper(testUser), testPassword)).StatusCode).To(Equal(http.StatusOK))
	// Later requests on the same connection need no header, as with HTTP.sys ...
	g.Expect(a.post("").StatusCode).To(Equal(http.StatusOK))
	// ... but another connection does.
	g.Expect(newNTLMConn(t, s).post("").StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(s.Stats().Calls[ActionCreate]).To(Equal(2))
}

func TestNTLMRefusesWrongPasswordReplayAndGarbage(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, DisableBasic: true})

	a := newNTLMConn(t, s)
	g.Expect(a.post(authenticate(t, a.challenge(), testUser, "not-the-password")).StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(a.post(authenticate(t, a.challenge(), "nobody", testPassword)).StatusCode).To(Equal(http.StatusUnauthorized))

	// An AUTHENTICATE message seen on the wire answers one challenge only: replayed on the same
	// connection, or on another after a fresh challenge, or with no challenge pending, it fails.
	b := newNTLMConn(t, s)
	captured := authenticate(t, b.challenge(), testUser, testPassword)
	g.Expect(b.post(captured).StatusCode).To(Equal(http.StatusOK))
	g.Expect(b.post(captured).StatusCode).To(Equal(http.StatusUnauthorized))
	c := newNTLMConn(t, s)
	c.challenge()
	g.Expect(c.post(captured).StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(newNTLMConn(t, s).post(captured).StatusCode).To(Equal(http.StatusUnauthorized))

	// Truncated, bit-flipped and foreign tokens are refused without harm.
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(captured, "Negotiate "))
	for i := 0; i < len(raw); i += 7 {
		d := newNTLMConn(t, s)
		d.challenge()
		g.Expect(d.post("Negotiate " + base64.StdEncoding.EncodeToString(raw[:i])).StatusCode).To(Equal(http.StatusUnauthorized))
		flipped := bytes.Clone(raw)
		flipped[i] ^= 0x40
		d.challenge()
		g.Expect(d.post("Negotiate " + base64.StdEncoding.EncodeToString(flipped)).StatusCode).To(Equal(http.StatusUnauthorized))
	}
	g.Expect(a.post("NTLM !!!").StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(s.Stats().Calls[ActionCreate]).To(Equal(1))
}

func TestAuthSchemesCanBeDisabled(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, DisableBasic: true, Executor: echoExecutor(nil)})
	_, err := mzClient(t, s, testUser, testPassword, false, "PT60S").CreateShell()
	g.Expect(err).To(MatchError(ContainSubstring("401")))
	stdout, _, _, err := mzClient(t, s, testUser, testPassword, true, "PT60S").RunWithString("whoami", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(Equal(testUser + "\r\n"))

	s = startServer(t, Options{TLS: true, DisableNTLM: true, Executor: echoExecutor(nil)})
	resp := post(t, s, "", soapCT, nil)
	g.Expect(resp.Header.Values("WWW-Authenticate")).To(Equal([]string{`Basic realm="WSMAN"`}))
	_, _, _, err = mzClient(t, s, testUser, testPassword, false, "PT60S").RunWithString("whoami", "")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestHTTPRefusals(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, MaxEnvelopeSize: 64 << 10})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(testUser+":"+testPassword))
	g.Expect(do(t, s, http.MethodGet, "/wsman", basic, soapCT, nil).StatusCode).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(do(t, s, http.MethodPost, "/other", basic, soapCT, nil).StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(post(t, s, basic, "text/xml", []byte("<x/>")).StatusCode).To(Equal(http.StatusUnsupportedMediaType))
	g.Expect(post(t, s, basic, soapCT, bytes.Repeat([]byte("x"), 65<<10)).StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
	g.Expect(s.Stats().Calls).To(BeEmpty())
}

func TestStartRefusesNonLoopback(t *testing.T) {
	g := NewWithT(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:5986"} {
		_, err := Start(Options{Addr: addr})
		g.Expect(err).To(MatchError(ContainSubstring("loopback")), addr)
	}
}
