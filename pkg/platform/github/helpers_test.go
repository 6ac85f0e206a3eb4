package github

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strconv"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// newTestClient starts a fake GitHub with the App installed on "acme" and a Client for it;
// edit adjusts the Config.
func newTestClient(t *testing.T, opts fakegithub.Options, edit func(*Config)) (*fakegithub.Server, *Client) {
	t.Helper()
	fake := fakegithub.StartForTest(t, opts)
	fake.InstallationID("acme")
	cfg := Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM()}
	if edit != nil {
		edit(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return fake, c
}

func otherRSAKeyPEM(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

func repoScope(repo string) platform.Scope { return platform.Scope{Repository: repo} }

func orgScope(org string) platform.Scope { return platform.Scope{Organization: org} }

// jitConfig registers a runner through the neutral Register and returns what GitHub calls its
// parts: the encoded JIT config and the numeric runner ID.
func jitConfig(r platform.RunnerRegistry, ctx context.Context, scope platform.Scope, spec platform.RunnerSpec) (string, int64, error) {
	reg, err := r.Register(ctx, scope, spec)
	if err != nil {
		return "", 0, err
	}
	id, _ := strconv.ParseInt(reg.ID, 10, 64)
	return reg.Config, id, nil
}

// mustID reads a neutral ID back as GitHub's number; 0 when it is none.
func mustID(id string) int64 {
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}
