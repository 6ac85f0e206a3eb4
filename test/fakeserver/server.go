package fakeserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// HTTPServer serves a fake's handler in the background on a listener from Listen. Its zero
// value is not started: URL is "" and Close does nothing.
type HTTPServer struct {
	url   string
	caPEM []byte
	srv   *http.Server
}

// Start listens on addr ("" means 127.0.0.1:0), with a self-signed certificate named
// commonName when useTLS is set, and serves h in the background.
func (s *HTTPServer) Start(addr string, useTLS bool, commonName string, h http.Handler) error {
	l, url, caPEM, err := Listen(addr, useTLS, commonName)
	if err != nil {
		return err
	}
	s.caPEM, s.url = caPEM, url
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return nil
}

// Close stops serving, giving requests in flight two seconds to finish.
func (s *HTTPServer) Close() {
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(ctx)
	}
}

// URL is the server's http:// or https:// root without a trailing slash.
func (s *HTTPServer) URL() string { return s.url }

// CACertPEM is the certificate to trust when the server uses TLS (nil otherwise).
func (s *HTTPServer) CACertPEM() []byte { return s.caPEM }

// Client returns a client that trusts the server's certificate (a plain client without TLS).
func (s *HTTPServer) Client() *http.Client {
	c := &http.Client{Timeout: 30 * time.Second}
	if len(s.caPEM) > 0 {
		tr, err := TrustingTransport(s.caPEM)
		if err != nil {
			panic(err) // the server's own certificate
		}
		c.Transport = tr
	}
	return c
}

// StartForTest starts a fake with start on a loopback port and stops it with stop when the test
// ends; a fake that cannot start fails the test, named by name.
func StartForTest(t testing.TB, name string, start func(addr string) error, stop func()) {
	t.Helper()
	if err := start("127.0.0.1:0"); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(stop)
}

// PostJSON sends body as a JSON POST to url with header's fields (a platform's webhook
// headers) and returns the receiver's status; it reads and drops up to 64 KiB of the answer.
func PostJSON(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, nil
}
