package fakegithub_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestAppJWTIsVerified(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{AppID: 42})
	other := fakegithub.StartForTest(t, fakegithub.Options{AppID: 42})
	id := strconv.FormatInt(fake.InstallationID("acme"), 10)
	hs256, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Issuer: "42"}).SignedString([]byte("k"))
	tests := []struct {
		name   string
		token  string
		status int
	}{
		{name: "valid", token: appJWT(t, fake, "42", -30*time.Second, 2*time.Minute), status: http.StatusCreated},
		{name: "signed by another key", token: appJWT(t, other, "42", -30*time.Second, 2*time.Minute), status: http.StatusUnauthorized},
		{name: "wrong issuer", token: appJWT(t, fake, "43", -30*time.Second, 2*time.Minute), status: http.StatusUnauthorized},
		{name: "expired", token: appJWT(t, fake, "42", -5*time.Minute, 2*time.Minute), status: http.StatusUnauthorized},
		{name: "issued in the future", token: appJWT(t, fake, "42", 5*time.Minute, 2*time.Minute), status: http.StatusUnauthorized},
		{name: "lives over ten minutes", token: appJWT(t, fake, "42", -30*time.Second, 11*time.Minute), status: http.StatusUnauthorized},
		{name: "HS256", token: hs256, status: http.StatusUnauthorized},
		{name: "missing", token: "", status: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			auth := ""
			if tt.token != "" {
				auth = "Bearer " + tt.token
			}
			r := call(t, http.MethodPost, fake.URL()+"/app/installations/"+id+"/access_tokens", auth, nil)
			g.Expect(r.status).To(Equal(tt.status), string(r.body))
			if tt.status == http.StatusCreated {
				g.Expect(r.json(t)).To(HaveKeyWithValue("token", HavePrefix("ghs_")))
				g.Expect(r.json(t)).To(HaveKey("expires_at"))
			}
		})
	}
}

func TestInstallationLookups(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	id := fake.InstallationID("acme")
	auth := "Bearer " + validJWT(t, fake)

	g.Expect(call(t, http.MethodGet, fake.URL()+"/orgs/acme/installation", auth, nil).json(t)).To(HaveKeyWithValue("id", BeNumerically("==", id)))
	g.Expect(call(t, http.MethodGet, fake.URL()+"/repos/acme/api/installation", auth, nil).json(t)).To(HaveKeyWithValue("id", BeNumerically("==", id)))
	g.Expect(call(t, http.MethodGet, fake.URL()+"/orgs/globex/installation", auth, nil).status).To(Equal(http.StatusNotFound))
	list := call(t, http.MethodGet, fake.URL()+"/app/installations", auth, nil)
	g.Expect(list.body).To(ContainSubstring(`"login":"acme"`))
	g.Expect(list.header.Get("X-RateLimit-Remaining")).NotTo(BeEmpty(), "App calls carry rate-limit headers too")
	g.Expect(call(t, http.MethodGet, fake.URL()+"/orgs/acme/installation", "", nil).status).To(Equal(http.StatusUnauthorized))
}

func TestInstallationTokensAreChecked(t *testing.T) {
	now := time.Now()
	clock := &now
	fake := fakegithub.StartForTest(t, fakegithub.Options{TokenTTL: time.Hour, Clock: func() time.Time { return *clock }})
	acme := installationToken(t, fake, "acme")
	globex := installationToken(t, fake, "globex")
	runners := fake.URL() + "/orgs/acme/actions/runners"
	tests := []struct {
		name    string
		auth    string
		prepare func()
		status  int
	}{
		{name: "token scheme", auth: "token " + acme, status: http.StatusOK},
		{name: "bearer scheme", auth: "Bearer " + acme, status: http.StatusOK},
		{name: "no credentials", auth: "", status: http.StatusUnauthorized},
		{name: "unknown token", auth: "token ghs_nope", status: http.StatusUnauthorized},
		{name: "App JWT is not an installation token", auth: "Bearer " + validJWT(t, fake), status: http.StatusUnauthorized},
		{name: "other account's installation", auth: "token " + globex, status: http.StatusForbidden},
		{name: "expired", auth: "token " + acme, prepare: func() { *clock = now.Add(61 * time.Minute) }, status: http.StatusUnauthorized},
		{name: "revoked", auth: "token " + globex, prepare: func() { *clock = now; fake.RevokeTokens() }, status: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prepare != nil {
				tt.prepare()
			}
			r := call(t, http.MethodGet, runners, tt.auth, nil)
			NewWithT(t).Expect(r.status).To(Equal(tt.status), string(r.body))
		})
	}
}

func TestRateLimitBudget(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{RateLimit: 2})
	auth := "token " + installationToken(t, fake, "acme")
	url := fake.URL() + "/orgs/acme/actions/runners"

	first := call(t, http.MethodGet, url, auth, nil)
	g.Expect(first.status).To(Equal(http.StatusOK))
	g.Expect(first.header.Get("X-RateLimit-Limit")).To(Equal("2"))
	g.Expect(first.header.Get("X-RateLimit-Remaining")).To(Equal("1"))
	g.Expect(first.header.Get("X-RateLimit-Reset")).NotTo(BeEmpty())
	g.Expect(call(t, http.MethodGet, url, auth, nil).status).To(Equal(http.StatusOK))

	exhausted := call(t, http.MethodGet, url, auth, nil)
	g.Expect(exhausted.status).To(Equal(http.StatusForbidden))
	g.Expect(exhausted.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	g.Expect(string(exhausted.body)).To(ContainSubstring("API rate limit exceeded"))
}
