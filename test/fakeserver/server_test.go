package fakeserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestHTTPServerServesOverTLSUntilClosed: a TLS server is reached by its own Client (which
// trusts only its certificate) at an https:// URL, and refuses connections once closed; an
// unstarted one has no URL and closes without harm.
func TestHTTPServerServesOverTLSUntilClosed(t *testing.T) {
	g := NewWithT(t)
	var idle HTTPServer
	g.Expect(idle.URL()).To(BeEmpty())
	idle.Close()

	var s HTTPServer
	g.Expect(s.Start("", true, "fake-test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))).To(Succeed())
	g.Expect(s.URL()).To(HavePrefix("https://127.0.0.1:"))
	g.Expect(s.CACertPEM()).NotTo(BeEmpty())

	resp, err := s.Client().Get(s.URL() + "/hello")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(string(body)).To(Equal("/hello"))
	_, err = http.Get(s.URL() + "/hello")
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "the system roots do not vouch for it")

	s.Close()
	_, err = s.Client().Get(s.URL() + "/hello")
	g.Expect(err).To(HaveOccurred())
}

// TestPostJSON: the body arrives as JSON with the given headers, and the receiver's status is
// returned; an unreachable receiver is an error with status 0.
func TestPostJSON(t *testing.T) {
	g := NewWithT(t)
	type request struct {
		r    *http.Request
		body string
	}
	got := make(chan request, 1)
	var s HTTPServer
	g.Expect(s.Start("", false, "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r, string(body)}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, strings.Repeat("x", 1<<17))
	}))).To(Succeed())
	t.Cleanup(s.Close)

	h := http.Header{}
	h.Set("X-Event", "job")
	status, err := PostJSON(context.Background(), s.Client(), s.URL()+"/hooks", h, []byte(`{"a":1}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusAccepted))
	req := <-got
	r := req.r
	g.Expect(r.Method).To(Equal(http.MethodPost))
	g.Expect(r.URL.Path).To(Equal("/hooks"))
	g.Expect(r.Header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(r.Header.Get("X-Event")).To(Equal("job"))
	g.Expect(req.body).To(Equal(`{"a":1}`))

	s.Close()
	status, err = PostJSON(context.Background(), s.Client(), s.URL()+"/hooks", h, nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(status).To(BeZero())
}
