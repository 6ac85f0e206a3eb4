package console

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "client-secret")
	key := filepath.Join(dir, "session-key")
	short := filepath.Join(dir, "short-key")
	ca := filepath.Join(dir, "issuer-ca.pem")
	notPEM := filepath.Join(dir, "not-a-ca.pem")
	for path, data := range map[string]string{secret: "s3cret\n", key: strings.Repeat("k", 32), short: "tooshort", ca: string(testCAPEM(t)), notPEM: "hello"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := map[string]string{
		"OIDC_ISSUER_URL": "https://login.example.com/tenant/v2.0", "OIDC_CLIENT_ID": "console", "OIDC_ROLE_NAME": "HyperFleet.Operator",
		"PUBLIC_URL": "https://console.example.com/", "OIDC_CLIENT_SECRET_FILE": secret, "SESSION_KEY_FILE": key,
	}
	for _, tc := range []struct {
		name    string
		change  map[string]string
		wantErr string
	}{
		{name: "complete"},
		{name: "no issuer", change: map[string]string{"OIDC_ISSUER_URL": ""}, wantErr: "OIDC_ISSUER_URL is required"},
		{name: "no role", change: map[string]string{"OIDC_ROLE_NAME": ""}, wantErr: "OIDC_ROLE_NAME is required"},
		{name: "short session key", change: map[string]string{"SESSION_KEY_FILE": short}, wantErr: "at least 32 random bytes"},
		{name: "missing secret file", change: map[string]string{"OIDC_CLIENT_SECRET_FILE": filepath.Join(dir, "nope")}, wantErr: "OIDC client secret"},
		{name: "bad interval", change: map[string]string{"INVENTORY_REFRESH_INTERVAL": "soon"}, wantErr: "INVENTORY_REFRESH_INTERVAL"},
		{name: "plain http elsewhere than loopback", change: map[string]string{"PUBLIC_URL": "http://console.example.com"}, wantErr: "https://"},
		{name: "insecure cookies on a real host", change: map[string]string{"PUBLIC_URL": "https://console.example.com", "CONSOLE_INSECURE_COOKIES": "true"}, wantErr: "only allowed"},
		{name: "plain http on loopback needs the explicit setting", change: map[string]string{"PUBLIC_URL": "http://127.0.0.1:8080"}, wantErr: "CONSOLE_INSECURE_COOKIES=true"},
		{name: "local fleet", change: map[string]string{"PUBLIC_URL": "http://127.0.0.1:8080", "CONSOLE_INSECURE_COOKIES": "true"}},
		{name: "read-only role equal to the role", change: map[string]string{"OIDC_READ_ONLY_ROLE_NAME": "HyperFleet.Operator"}, wantErr: "must differ"},
		{name: "list of signed-out sessions", change: map[string]string{"SESSION_REVOCATIONS": "hyperfleet-system/hyperfleet-console-sessions"}},
		{name: "list of signed-out sessions without a namespace", change: map[string]string{"SESSION_REVOCATIONS": "hyperfleet-console-sessions"}, wantErr: "namespace/name"},
		{name: "an issuer on a private CA", change: map[string]string{"OIDC_ISSUER_CA_FILE": ca}},
		{name: "an issuer CA file without a certificate", change: map[string]string{"OIDC_ISSUER_CA_FILE": notPEM}, wantErr: "no PEM certificate"},
		{name: "an issuer CA file that is not there", change: map[string]string{"OIDC_ISSUER_CA_FILE": filepath.Join(dir, "nope.pem")}, wantErr: "OIDC_ISSUER_CA_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.change {
				env[k] = v
			}
			s, err := LoadSettings(func(k string) string { return env[k] })
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.ClientSecret).To(Equal("s3cret"))
			g.Expect(s.RoleClaim).To(Equal("roles"))
			g.Expect(s.InventoryRefreshInterval).To(Equal(15 * time.Second))
			g.Expect(s.RedirectURL()).To(HaveSuffix("/oidc/callback"))
			g.Expect(s.RedirectURL()).NotTo(ContainSubstring("//oidc"))
			g.Expect(s.IssuerRoots != nil).To(Equal(s.IssuerCAFile != ""), "a CA file gives the OIDC client its roots")
		})
	}
	t.Run("claims and prefixes", func(t *testing.T) {
		g := NewWithT(t)
		s, err := LoadSettings(func(k string) string { return base[k] })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]string{s.UsernameClaim, s.UsernamePrefix, s.GroupsClaim, s.GroupsPrefix}).To(Equal([]string{"email", "oidc:", "groups", "oidc:"}))
		env := map[string]string{"OIDC_USERNAME_CLAIM": "sub", "OIDC_USERNAME_PREFIX": "-", "OIDC_GROUPS_PREFIX": "-"}
		s, err = LoadSettings(func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return base[k]
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]string{s.UsernameClaim, s.UsernamePrefix, s.GroupsPrefix}).To(Equal([]string{"sub", "", ""}), `"-" is no prefix`)
	})
	t.Run("history database", func(t *testing.T) {
		g := NewWithT(t)
		s, err := LoadSettings(func(k string) string { return base[k] })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.HistoryURL).To(Equal("sqlite:///var/lib/hyperfleet-console/history.db"), "on the Deployment's volume")
		env := map[string]string{"DATA_DIR": "/data/"}
		s, _ = LoadSettings(func(k string) string { return env[k] + base[k] })
		g.Expect(s.HistoryURL).To(Equal("sqlite:///data/history.db"))
		env = map[string]string{"DATA_DIR": "/data", "HISTORY_URL": "postgres://console:pw@db/hyperfleet"}
		s, _ = LoadSettings(func(k string) string { return env[k] + base[k] })
		g.Expect(s.HistoryURL).To(Equal("postgres://console:pw@db/hyperfleet"))
		g.Expect(redactURL(s.HistoryURL)).NotTo(ContainSubstring("pw"))
		url := filepath.Join(dir, "history-url")
		g.Expect(os.WriteFile(url, []byte("postgres://console:pw@db/hyperfleet\n"), 0o600)).To(Succeed())
		env = map[string]string{"HISTORY_URL_FILE": url}
		s, err = LoadSettings(func(k string) string { return env[k] + base[k] })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.HistoryURL).To(Equal("postgres://console:pw@db/hyperfleet"), "a URL with a password comes from a file")
	})
}

func TestPrincipalFromClaims(t *testing.T) {
	s := Settings{RoleName: "op", ReadOnlyRoleName: "viewer", RoleClaim: "roles", UsernameClaim: "email", GroupsClaim: "groups",
		UsernamePrefix: "oidc:", GroupsPrefix: "oidc:"}
	noPrefix := s
	noPrefix.UsernamePrefix, noPrefix.GroupsPrefix = "", ""
	for _, tc := range []struct {
		name     string
		settings Settings
		claims   map[string]any
		want     Principal
		wantErr  error
	}{
		{"role in a list", s, map[string]any{"email": "a@x", "roles": []any{"other", "op"}, "groups": []any{"g1"}},
			Principal{User: "oidc:a@x", Groups: []string{"oidc:g1"}, Name: "a@x"}, nil},
		{"role as a single string", s, map[string]any{"email": "a@x", "roles": "op", "name": "A"}, Principal{User: "oidc:a@x", Name: "A"}, nil},
		{"read-only role", s, map[string]any{"email": "a@x", "roles": []any{"viewer"}}, Principal{User: "oidc:a@x", Name: "a@x", ReadOnly: true}, nil},
		{"no role", s, map[string]any{"email": "a@x", "roles": []any{"opx"}}, Principal{}, ErrNoRole},
		{"no roles claim", s, map[string]any{"email": "a@x"}, Principal{}, ErrNoRole},
		{"no username", s, map[string]any{"roles": []any{"op"}}, Principal{}, ErrNoUsername},
		{"system groups are dropped without a prefix", noPrefix, map[string]any{"email": "a@x", "roles": "op", "groups": []any{"system:masters", "dev"}},
			Principal{User: "a@x", Groups: []string{"dev"}, Name: "a@x"}, nil},
		{"prefixed system group is harmless", s, map[string]any{"email": "a@x", "roles": "op", "groups": []any{"system:masters"}},
			Principal{User: "oidc:a@x", Groups: []string{"oidc:system:masters"}, Name: "a@x"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := tc.settings.principalFromClaims(tc.claims)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p).To(Equal(tc.want))
		})
	}
	_, err := noPrefix.principalFromClaims(map[string]any{"email": "system:admin", "roles": "op"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("reserved")))
}

func TestSealedCookies(t *testing.T) {
	g := NewWithT(t)
	s, err := newSealer([]byte(strings.Repeat("a", 32)))
	g.Expect(err).NotTo(HaveOccurred())
	other, _ := newSealer([]byte(strings.Repeat("b", 32)))
	v, err := s.seal(sessionPurpose, time.Now().Add(time.Hour), session{Principal: Principal{User: "oidc:a"}})
	g.Expect(err).NotTo(HaveOccurred())
	var got session
	g.Expect(s.open(sessionPurpose, v, &got)).To(Succeed())
	g.Expect(got.Principal.User).To(Equal("oidc:a"))
	g.Expect(s.open(loginPurpose, v, &got)).To(MatchError(errBadSeal), "a session is not a sign-in cookie")
	g.Expect(other.open(sessionPurpose, v, &got)).To(MatchError(errBadSeal), "another key")
	tampered := []byte(v)
	tampered[len(tampered)/2] ^= 1
	g.Expect(s.open(sessionPurpose, string(tampered), &got)).To(MatchError(errBadSeal))
	expired, _ := s.seal(sessionPurpose, time.Now().Add(-time.Second), session{})
	g.Expect(s.open(sessionPurpose, expired, &got)).To(MatchError(errBadSeal))
	g.Expect(safeNext("//evil.example.com")).To(Equal("/"))
	g.Expect(safeNext("https://evil.example.com")).To(Equal("/"))
	g.Expect(safeNext("/\\evil.example.com")).To(Equal("/"))
	g.Expect(safeNext("/jobs?x=1")).To(Equal("/jobs?x=1"))
}

func TestJobIDs(t *testing.T) {
	g := NewWithT(t)
	op, ns, name, err := parseJobID(jobID(opDelete, "team-a", "vm.1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{op, ns, name}).To(Equal([]string{opDelete, "team-a", "vm.1"}))
	for _, bad := range []string{"", "create", "create:a", "create::b", "reboot:a:b", "create:a:b:c"} {
		_, _, _, err := parseJobID(bad)
		g.Expect(err).To(MatchError(errBadJobID), bad)
	}
}

func TestCreateVMRequestValidate(t *testing.T) {
	g := NewWithT(t)
	ok := CreateVMRequest{Namespace: "team-a", Name: "vm-1", Cluster: "pve", Template: "ubuntu-2404-runner", CPUs: 2, MemoryMiB: 2048,
		DiskGiB: 40, Bridge: "vmbr0", VLAN: 20, UserData: "#cloud-config\nhostname: vm-1\n"}
	g.Expect(ok.Validate()).To(BeEmpty())
	bad := CreateVMRequest{Namespace: "Team A", Name: strings.Repeat("a", 64), Host: "pve 1", DiskGiB: -1}
	fields := map[string]bool{}
	for _, e := range bad.Validate() {
		fields[e.Field] = true
	}
	g.Expect(fields).To(Equal(map[string]bool{"namespace": true, "name": true, "cluster": true, "host": true, "template": true, "diskGiB": true}))
}

func TestLatencyOf(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	jobs := map[int64]demand.Record{
		1: {State: platform.JobQueued, FirstQueued: ago(90 * time.Second), Transition: ago(90 * time.Second)},
		2: {State: platform.JobQueued, FirstQueued: ago(10 * time.Second), Transition: ago(10 * time.Second)},
		3: {State: platform.JobInProgress, FirstQueued: ago(60 * time.Second), Transition: ago(50 * time.Second)},
		4: {State: platform.JobInProgress, FirstQueued: ago(60 * time.Second), Transition: ago(30 * time.Second)},
		5: {State: platform.JobInProgress, FirstQueued: ago(60 * time.Second), Transition: ago(58 * time.Second)},
		// Seen running first: no pickup time.
		6: {State: platform.JobInProgress, Transition: ago(5 * time.Second)},
		7: {State: platform.JobCompleted, FirstQueued: ago(600 * time.Second), Transition: ago(1 * time.Second)},
	}
	g.Expect(latencyOf(jobs, now)).To(Equal(PoolLatency{OldestQueued: 90 * time.Second, PickupMedian: 10 * time.Second, Running: 3}))
	g.Expect(latencyOf(map[int64]demand.Record{}, now)).To(Equal(PoolLatency{}))
}

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "issuer CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
