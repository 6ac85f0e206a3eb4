package pvesim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

func init() {
	// go-proxmox polls tasks once a second by default; the simulated tasks
	// take milliseconds.
	proxmox.DefaultWaitInterval = 20 * time.Millisecond
}

// httpClient trusts only the simulator's CA.
func httpClient(t testing.TB, s *Simulator) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("simulator CA PEM did not parse")
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
}

// tokenClient is go-proxmox authenticated with the default test token.
func tokenClient(t testing.TB, s *Simulator) *proxmox.Client {
	return proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient(t, s)),
		proxmox.WithAPIToken(TestTokenID, TestTokenSecret))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
