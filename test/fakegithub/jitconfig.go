package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// The encoded_jit_config the fake issues has the shape actions/runner reads with `run.sh
// --jitconfig` (Runner.Listener: the config is base64 of a JSON object whose keys are file names
// in the runner's root and whose values are each file's bytes in base64; the runner writes every
// entry as a hidden file and starts as if `config.sh` had run):
//
//	.runner                  RunnerSettings: agentId, agentName, poolId, poolName, serverUrl,
//	                         gitHubUrl, workFolder, ephemeral (camelCase, as the runner saves it)
//	.credentials             {"scheme": "OAuth", "data": {"clientId", "authorizationUrl",
//	                         "requireFipsCryptography"}}
//	.credentials_rsaparams   the runner's RSA key: d, dp, dq, exponent, inverseQ, modulus, p, q,
//	                         each big-endian bytes in base64 (RSAParametersSerializable)
//
// As the real runner does, a runner of the fake signs a JWT client assertion with that key
// (iss = sub = clientId, aud = authorizationUrl, a few minutes' lifetime) and exchanges it at
// authorizationUrl for an access token (an OAuth 2.0 client-credentials grant with a
// jwt-bearer client assertion, RFC 7523), which then authenticates its runner-protocol calls.
// The fake's runner protocol itself (/_fake/runner/...) stands in for the Actions broker and run
// service, which the fake does not implement.
//
// One entry is the fake's own: when it serves HTTPS with its generated certificate, the config
// also carries FakeCAFile, the PEM of that certificate, so a runner given nothing but the config
// can verify the server it talks to. GitHub never sends it; a real runner would write it beside
// .runner and ignore it. Everything HyperFleet does with a JIT config is pass it to the runner
// untouched, so nothing in HyperFleet reads any of this.
const (
	RunnerFile         = ".runner"
	CredentialsFile    = ".credentials"
	RSAParamsFile      = ".credentials_rsaparams"
	FakeCAFile         = ".hyperfleet_fake_ca.pem"
	clientAssertionJWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// RunnerSettings is the .runner file.
type RunnerSettings struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	PoolName   string `json:"poolName"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	Ephemeral  bool   `json:"ephemeral,omitempty"`
}

// CredentialData is the .credentials file.
type CredentialData struct {
	Scheme string            `json:"scheme"`
	Data   map[string]string `json:"data"`
}

// rsaParams is the .credentials_rsaparams file; encoding/json writes []byte as base64, as the
// runner's serializer does.
type rsaParams struct {
	D        []byte `json:"d"`
	DP       []byte `json:"dp"`
	DQ       []byte `json:"dq"`
	Exponent []byte `json:"exponent"`
	InverseQ []byte `json:"inverseQ"`
	Modulus  []byte `json:"modulus"`
	P        []byte `json:"p"`
	Q        []byte `json:"q"`
}

// JITConfig is a decoded encoded_jit_config: the files the runner would write.
type JITConfig struct {
	Settings    RunnerSettings
	Credentials CredentialData
	Key         *rsa.PrivateKey
	// CA is FakeCAFile's content, empty when the fake serves plain HTTP.
	CA string
}

// RunnerID is the runner's ID (the .runner file's agentId).
func (c JITConfig) RunnerID() int64 { return c.Settings.AgentID }

// RunnerName is the runner's name (agentName).
func (c JITConfig) RunnerName() string { return c.Settings.AgentName }

// Scope is what the runner was registered for, "owner/name" or "org": the path of gitHubUrl.
func (c JITConfig) Scope() string {
	u, err := url.Parse(c.Settings.GitHubURL)
	if err != nil {
		return ""
	}
	return strings.Trim(u.Path, "/")
}

// BaseURL is the fake's base URL, where its runner protocol is served: serverUrl without the
// pipelines path.
func (c JITConfig) BaseURL() string {
	return strings.TrimSuffix(strings.TrimRight(c.Settings.ServerURL, "/"), pipelinesPath)
}

// pipelinesPath is the path GitHub Enterprise Server serves the Actions service under; the fake's
// serverUrl uses it too (github.com's is another host).
const pipelinesPath = "/_services/pipelines"

// EncodeJITConfig renders a config in the shape of encoded_jit_config.
func EncodeJITConfig(c JITConfig) (string, error) {
	settings, err := json.Marshal(c.Settings)
	if err != nil {
		return "", err
	}
	creds, err := json.Marshal(c.Credentials)
	if err != nil {
		return "", err
	}
	if c.Key == nil || len(c.Key.Primes) != 2 {
		return "", errors.New("jit config needs a two-prime RSA key")
	}
	c.Key.Precompute()
	params, err := json.Marshal(rsaParams{
		D: c.Key.D.Bytes(), DP: c.Key.Precomputed.Dp.Bytes(), DQ: c.Key.Precomputed.Dq.Bytes(),
		Exponent: big.NewInt(int64(c.Key.E)).Bytes(), InverseQ: c.Key.Precomputed.Qinv.Bytes(),
		Modulus: c.Key.N.Bytes(), P: c.Key.Primes[0].Bytes(), Q: c.Key.Primes[1].Bytes(),
	})
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	files := map[string]string{RunnerFile: b64(settings), CredentialsFile: b64(creds), RSAParamsFile: b64(params)}
	if c.CA != "" {
		files[FakeCAFile] = b64([]byte(c.CA))
	}
	out, err := json.Marshal(files)
	if err != nil {
		return "", err
	}
	return b64(out), nil
}

// JITConfigFiles are the files `run.sh --jitconfig` writes into the runner's directory before it
// starts, by name.
func JITConfigFiles(encoded string) (map[string][]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("jit config is not base64: %w", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return nil, fmt.Errorf("jit config is not a JSON object of files: %w", err)
	}
	out := make(map[string][]byte, len(files))
	for name, v := range files {
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return nil, fmt.Errorf("jit config names a file outside the runner's directory: %q", name)
		}
		if out[name], err = base64.StdEncoding.DecodeString(v); err != nil {
			return nil, fmt.Errorf("jit config %s is not base64: %w", name, err)
		}
	}
	return out, nil
}

// DecodeJITConfig reads an encoded_jit_config as actions/runner does, and checks that every file
// the runner needs is there and well formed.
func DecodeJITConfig(encoded string) (JITConfig, error) {
	var c JITConfig
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return c, fmt.Errorf("jit config is not base64: %w", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return c, fmt.Errorf("jit config is not a JSON object of files: %w", err)
	}
	file := func(name string) ([]byte, error) {
		v, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("jit config lacks %s", name)
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("jit config %s is not base64: %w", name, err)
		}
		return b, nil
	}
	for _, f := range []struct {
		name string
		into any
	}{{RunnerFile, &c.Settings}, {CredentialsFile, &c.Credentials}} {
		b, err := file(f.name)
		if err != nil {
			return c, err
		}
		if err := json.Unmarshal(b, f.into); err != nil {
			return c, fmt.Errorf("jit config %s: %w", f.name, err)
		}
	}
	if c.Settings.AgentID == 0 || c.Settings.AgentName == "" || c.Settings.ServerURL == "" {
		return c, fmt.Errorf("jit config %s lacks agentId, agentName or serverUrl", RunnerFile)
	}
	if c.Credentials.Scheme != "OAuth" || c.Credentials.Data["clientId"] == "" || c.Credentials.Data["authorizationUrl"] == "" {
		return c, fmt.Errorf("jit config %s is not an OAuth credential with clientId and authorizationUrl", CredentialsFile)
	}
	b, err := file(RSAParamsFile)
	if err != nil {
		return c, err
	}
	var p rsaParams
	if err := json.Unmarshal(b, &p); err != nil {
		return c, fmt.Errorf("jit config %s: %w", RSAParamsFile, err)
	}
	n := func(b []byte) *big.Int { return new(big.Int).SetBytes(b) }
	key := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: n(p.Modulus), E: int(n(p.Exponent).Int64())},
		D:         n(p.D), Primes: []*big.Int{n(p.P), n(p.Q)},
	}
	if err := key.Validate(); err != nil {
		return c, fmt.Errorf("jit config %s is not an RSA key: %w", RSAParamsFile, err)
	}
	key.Precompute()
	c.Key = key
	if _, ok := files[FakeCAFile]; ok {
		ca, err := file(FakeCAFile)
		if err != nil {
			return c, err
		}
		c.CA = string(ca)
	}
	return c, nil
}

// ClientAssertion signs the JWT the runner presents at authorizationUrl, as actions/runner's
// OAuth credential does.
func (c JITConfig) ClientAssertion(now time.Time) (string, error) {
	id := c.Credentials.Data["clientId"]
	claims := jwt.RegisteredClaims{
		Issuer: id, Subject: id, Audience: jwt.ClaimStrings{c.Credentials.Data["authorizationUrl"]},
		ID: randomHex(16), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-30 * time.Second)),
		ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.Key)
}

// newRunnerKey is a runner's RSA key, 2048 bits as the runner's own.
func newRunnerKey() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) }
