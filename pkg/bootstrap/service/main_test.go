package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

var td = spiffeid.RequireTrustDomainFromString("hyperfleet.test")

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server")
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// harness is a running bootstrap service with a fake GitHub and one fleet.
type harness struct {
	url    string
	ca     *identity.CA
	prov   *builtin.Provisioner
	gh     *fakegithub.Server
	fleet  *bootstraptest.Fleet
	caKey  types.NamespacedName
	tpm    *tpm.Attestor
	client *http.Client // TLS without a client certificate
}

func startService(t *testing.T) *harness { return startServiceWith(t, nil) }

// startServiceWith lets tune change the TPM attestor, and each of opts the service's options,
// before the service starts.
func startServiceWith(t *testing.T, tune func(*tpm.Attestor), opts ...func(*service.Options)) *harness {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hyperfleet-system-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	h := &harness{caKey: types.NamespacedName{Namespace: ns.Name, Name: "bootstrap-ca"}}
	var err error
	h.ca, err = builtin.LoadOrCreateCA(ctx, env.Client, h.caKey, td)
	g.Expect(err).NotTo(HaveOccurred())
	h.prov = builtin.NewProvisioner(env.Client, h.caKey, td)
	h.tpm = &tpm.Attestor{Client: env.Client, CA: h.ca}
	if tune != nil {
		tune(h.tpm)
	}
	o := service.Options{Client: env.Client, CA: h.ca, Attestor: &builtin.Attestor{Client: env.Client, CA: h.ca}, TPM: h.tpm,
		Platforms: bootstraptest.Platforms(env.Client)}
	for _, f := range opts {
		f(&o)
	}
	srv, err := service.New(o)
	g.Expect(err).NotTo(HaveOccurred())
	h.url, err = srv.Start(ctx, "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	h.gh = fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	h.fleet = bootstraptest.NewFleet(t, env.Client, h.gh)
	h.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.TLSClientConfig(h.ca.Bundle(), tlsconfig.AuthorizeID(identity.BootstrapServiceID(td)))}}
	return h
}

func (h *harness) machine(t *testing.T, name string, ttl time.Duration) *bootstraptest.Machine {
	return h.fleet.NewMachine(t, name, h.prov, td, ttl)
}

// attest redeems token with a fresh key; the SVID is nil unless the answer is 200.
func (h *harness) attest(t *testing.T, token string) (*x509svid.SVID, int) {
	t.Helper()
	key, csr, err := identity.NewKeyAndCSR()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(protocol.AttestRequest{JoinToken: token, CSR: string(csr)})
	resp, err := h.client.Post(h.url+protocol.AttestPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var out protocol.AttestResponse
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	svid, err := identity.SVIDFromPEM([]byte(out.SVID), key)
	if err != nil {
		t.Fatal(err)
	}
	return svid, resp.StatusCode
}

// mtls is a client presenting svid (any x509svid.Source).
func (h *harness) mtls(svid x509svid.Source) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.MTLSClientConfig(svid, h.ca.Bundle(), tlsconfig.AuthorizeID(identity.BootstrapServiceID(td)))}}
}

// runnerConfig asks for the runner config with c; err is a transport (e.g. handshake) failure.
func (h *harness) runnerConfig(c *http.Client) (int, *protocol.RunnerConfig, error) {
	resp, err := c.Get(h.url + protocol.RunnerConfigPath)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	rc := &protocol.RunnerConfig{}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(rc); err != nil {
			return resp.StatusCode, nil, err
		}
	}
	return resp.StatusCode, rc, nil
}
