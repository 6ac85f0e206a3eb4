package pvesim

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// Test credentials StartForTest installs when Config.Tokens is empty.
const (
	TestTokenID     = "hyperfleet@pve!test"
	TestTokenSecret = "5b1f0e2c-7d3a-4c8e-9f61-2a4b6c8d0e1f"
)

// StartForTest starts a simulator on 127.0.0.1:0 and closes it when the test
// ends. Without tokens in cfg it accepts TestTokenID/TestTokenSecret.
func StartForTest(t testing.TB, cfg Config) *Simulator {
	t.Helper()
	if len(cfg.Tokens) == 0 {
		cfg.Tokens = []Token{{ID: TestTokenID, Secret: TestTokenSecret}}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("pvesim: %v", err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("pvesim: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// PersonClient is go-proxmox, trusting the simulator's CA and signed in with the test token:
// what a person (or another tool) acting on the hypervisor side uses in tests, so their stops,
// starts and config edits go through the API and leave the tasks PVE would record.
func (s *Simulator) PersonClient() *proxmox.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(TestTokenID, TestTokenSecret))
}
