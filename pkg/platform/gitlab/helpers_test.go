package gitlab_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// leastPrivilege are the scopes HyperFleet documents for its access token.
var leastPrivilege = []string{fakegitlab.ScopeCreateRunner, fakegitlab.ScopeManageRunner, fakegitlab.ScopeReadAPI}

const hookSecret = "pool-a-webhook-secret"

// newClient returns the real client for a fake started over HTTPS, trusting only its CA.
func newClient(t *testing.T, s *fakegitlab.Server, token string) *gitlab.Client {
	t.Helper()
	tr, err := platform.TransportWithCA(nil, s.CACertPEM())
	if err != nil {
		t.Fatal(err)
	}
	c, err := gitlab.NewClient(gitlab.Config{URL: s.URL(), Token: token, Transport: tr, CAPEM: s.CACertPEM()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readPayload(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func jobHookHeader(token string) http.Header {
	h := http.Header{}
	h.Set(gitlab.HeaderEvent, "Job Hook")
	h.Set(gitlab.HeaderEventUUID, "8c0b1e4f-5d2a-4b7e-9c3d-1f2e3a4b5c6d")
	if token != "" {
		h.Set(gitlab.HeaderToken, token)
	}
	return h
}
