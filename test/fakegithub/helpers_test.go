package fakegithub_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// appJWT signs App claims with the fake's App key, moved by the given offsets.
func appJWT(t *testing.T, fake *fakegithub.Server, iss string, iatOffset, lifetime time.Duration) string {
	t.Helper()
	block, _ := pem.Decode(fake.AppKeyPEM())
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	iat := time.Now().Add(iatOffset).Truncate(time.Second)
	claims := jwt.RegisteredClaims{Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(lifetime))}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func validJWT(t *testing.T, fake *fakegithub.Server) string {
	return appJWT(t, fake, strconv.FormatInt(fake.AppID(), 10), -30*time.Second, 2*time.Minute)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// call makes a raw request; auth is the whole Authorization header value, if any.
func call(t *testing.T, method, url, auth string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// installationToken mints a token for the installation on account.
func installationToken(t *testing.T, fake *fakegithub.Server, account string) string {
	t.Helper()
	id := fake.InstallationID(account)
	r := call(t, http.MethodPost, fake.URL()+"/app/installations/"+strconv.FormatInt(id, 10)+"/access_tokens", "Bearer "+validJWT(t, fake), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("access token: %d %s", r.status, r.body)
	}
	return r.json(t)["token"].(string)
}

// registerRunner generates a JIT config in scope ("org" or "owner/repo") and returns it encoded.
func registerRunner(t *testing.T, fake *fakegithub.Server, token, scope, name string, labels ...string) string {
	t.Helper()
	path := "/orgs/" + scope
	if bytes.ContainsRune([]byte(scope), '/') {
		path = "/repos/" + scope
	}
	r := call(t, http.MethodPost, fake.URL()+path+"/actions/runners/generate-jitconfig", "token "+token,
		map[string]any{"name": name, "runner_group_id": 1, "labels": labels})
	if r.status != http.StatusCreated {
		t.Fatalf("generate-jitconfig: %d %s", r.status, r.body)
	}
	return r.json(t)["encoded_jit_config"].(string)
}
