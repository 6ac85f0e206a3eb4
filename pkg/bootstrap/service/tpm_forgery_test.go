package service_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm/tpmtest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
)

// secretWriter is a client for a user who may write Secrets in namespace ns and nothing else
// (RBAC is on in the test API server).
func secretWriter(t *testing.T, ns string) client.Client {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	user := "secret-writer-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestTPMForgedChallengeIsRefused plays a user who may write Secrets in the runner namespace but
// holds neither the join token nor the TPM: they write challenge state of their own making and
// answer it. No SVID may come of it.
func TestTPMForgedChallengeIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := startService(t)
	m := h.machine(t, "tpm-forged", time.Minute)
	setMethod(t, m, bootstrapv1.AttestationTPM)
	attacker := secretWriter(t, h.fleet.Namespace)
	cfg := bootstraptest.Get(t, env.Client, m.Config)

	_, csrPEM, err := identity.NewKeyAndCSR()
	g.Expect(err).NotTo(HaveOccurred())
	answer := []byte("the attacker knows this answer, no TPM needed")
	sum := sha256.Sum256(answer)
	challengeID := "hftc_" + cfg.Namespace + "_" + cfg.Name + "_00112233445566778899aabbccddeeff"
	data := map[string][]byte{
		"challenge-id": []byte(challengeID), "secret-sha256": []byte(hex.EncodeToString(sum[:])), "csr": csrPEM,
		"spiffe-id": []byte(m.ID.String()), "expires-at": []byte(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
		"bootstrap-config": []byte(cfg.Namespace + "/" + cfg.Name), "bootstrap-config-uid": []byte(cfg.UID),
		"join-token-sha256": []byte(cfg.Status.JoinToken.SHA256), "mac": []byte("guessed"),
	}
	// Under every name the service used or uses, in the namespace the attacker controls...
	for _, name := range []string{cfg.Name + "-tpm-challenge", tpm.ChallengeSecretName(string(cfg.UID))} {
		g.Expect(attacker.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name},
			Type: tpm.ChallengeSecretType, Data: data})).To(Succeed())
	}
	// ...and not in the service's namespace, which the attacker cannot write.
	err = attacker.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.caKey.Namespace,
		Name: tpm.ChallengeSecretName(string(cfg.UID))}, Type: tpm.ChallengeSecretType, Data: data})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "RBAC keeps the attacker out of the service's namespace: %v", err)

	var out protocol.AttestResponse
	status := h.post(t, protocol.TPMActivatePath, protocol.TPMActivateRequest{ChallengeID: challengeID, Secret: answer}, &out)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(out.SVID).To(BeEmpty(), "no SVID for forged challenge state")
	g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.JoinToken.RedeemedTime).To(BeNil(), "the token is untouched")

	// The real VM still attests.
	vm := openTPM(t)
	svid, status := h.attestTPM(t, m.Token, vm, vm)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(svid.ID).To(Equal(m.ID))
}

// TestTPMChallengeStateIsAuthenticated plays someone who can edit the service's own challenge
// state (a leaked Secret-write right there, or a restored backup): changing any field, e.g. the
// expected answer to one they know, makes the challenge refused.
func TestTPMChallengeStateIsAuthenticated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := startService(t)
	m := h.machine(t, "tpm-tampered", time.Minute)
	setMethod(t, m, bootstrapv1.AttestationTPM)
	vm := openTPM(t)
	ch, status := h.tpmChallenge(t, m.Token, vm)
	g.Expect(status).To(Equal(http.StatusOK))

	cfg := bootstraptest.Get(t, env.Client, m.Config)
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: h.caKey.Namespace, Name: tpm.ChallengeSecretName(string(cfg.UID))}, s)).To(Succeed())
	answer := []byte("a known answer")
	sum := sha256.Sum256(answer)
	s.Data["secret-sha256"] = []byte(hex.EncodeToString(sum[:]))
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())

	_, status = h.tpmActivate(t, ch.ChallengeID, answer, vm)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
}

// TestTPMEnrolmentIsCheckedAtActivation: a TPM other than the enrolled one gets no SVID, even when
// the enrolment lands between the two steps.
func TestTPMEnrolmentIsCheckedAtActivation(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.machine(t, "tpm-enrol-late", time.Minute)
	setMethod(t, m, bootstrapv1.AttestationTPM)
	impostor, enrolled := openTPM(t), openTPM(t)
	ch, status := h.tpmChallenge(t, m.Token, impostor)
	g.Expect(status).To(Equal(http.StatusOK))

	cfg := bootstraptest.Get(t, env.Client, m.Config)
	cfg.Annotations = map[string]string{tpm.EKSHA256Annotation: enrolled.EKSHA256()}
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())

	secret, err := impostor.ActivateCredential(ch.CredentialBlob, ch.EncryptedSecret)
	g.Expect(err).NotTo(HaveOccurred())
	svid, status := h.tpmActivate(t, ch.ChallengeID, secret, impostor)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(svid).To(BeNil())
}

// TestTPMEKCertificateFromSwtpmLocalCA runs the EK certificate check against a swtpm provisioned
// by swtpm_setup with its local CA (RSA 2048 EK): trusted when that CA is the bundle, refused when
// the bundle is another manufacturer's.
func TestTPMEKCertificateFromSwtpmLocalCA(t *testing.T) {
	otherManufacturer, _ := testCA(t, "another manufacturer")
	for _, tt := range []struct {
		name       string
		trustLocal bool
		want       int
	}{
		{name: "bundle holds swtpm's local CA", trustLocal: true, want: http.StatusOK},
		{name: "bundle holds another manufacturer's CA", trustLocal: false, want: http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			addr, localCA := tpmtest.StartManufactured(t)
			roots := x509.NewCertPool()
			if tt.trustLocal {
				g.Expect(roots.AppendCertsFromPEM(localCA)).To(BeTrue())
			} else {
				roots.AddCert(otherManufacturer)
			}
			h := startServiceWith(t, func(a *tpm.Attestor) { a.EKRoots, a.RequireEKCertificate = roots, true })
			m := h.machine(t, "tpm-localca", time.Minute)
			setMethod(t, m, bootstrapv1.AttestationTPM)
			tr, err := agenttpm.Open(addr)
			g.Expect(err).NotTo(HaveOccurred())
			vm, err := agenttpm.NewDevice(tr)
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = vm.Close() })
			svid, status := h.attestTPM(t, m.Token, vm, vm)
			g.Expect(status).To(Equal(tt.want))
			if tt.want == http.StatusOK {
				g.Expect(svid.ID).To(Equal(m.ID))
			}
		})
	}
}

// TestTPMEKCertificate: with a manufacturer CA bundle configured, a TPM must present an EK
// certificate that chains to it and certifies its own EK.
func TestTPMEKCertificate(t *testing.T) {
	manufacturer, manufacturerKey := testCA(t, "TPM manufacturer")
	forger, forgerKey := testCA(t, "forger")
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(manufacturer)
	tests := []struct {
		name    string
		require bool
		tpm     func(t *testing.T) string
		want    int
	}{
		{name: "certificate from the manufacturer", require: true, want: http.StatusOK,
			tpm: func(t *testing.T) string {
				return tpmtest.StartWithEKCertificate(t, manufacturer, manufacturerKey, nil)
			}},
		{name: "certificate from another CA", require: true, want: http.StatusUnauthorized,
			tpm: func(t *testing.T) string { return tpmtest.StartWithEKCertificate(t, forger, forgerKey, nil) }},
		{name: "manufacturer's certificate of another key", require: true, want: http.StatusUnauthorized,
			tpm: func(t *testing.T) string {
				return tpmtest.StartWithEKCertificate(t, manufacturer, manufacturerKey, otherKey.Public())
			}},
		{name: "no certificate when one is required", require: true, want: http.StatusUnauthorized,
			tpm: func(t *testing.T) string { return tpmtest.Start(t) }},
		{name: "no certificate when none is required", require: false, want: http.StatusOK,
			tpm: func(t *testing.T) string { return tpmtest.Start(t) }},
		{name: "forged certificate when none is required", require: false, want: http.StatusUnauthorized,
			tpm: func(t *testing.T) string { return tpmtest.StartWithEKCertificate(t, forger, forgerKey, nil) }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := startServiceWith(t, func(a *tpm.Attestor) { a.EKRoots, a.RequireEKCertificate = roots, tt.require })
			m := h.machine(t, "tpm-ekcert-"+string(rune('a'+i)), time.Minute)
			setMethod(t, m, bootstrapv1.AttestationTPM)
			tr, err := agenttpm.Open(tt.tpm(t))
			g.Expect(err).NotTo(HaveOccurred())
			vm, err := agenttpm.NewDevice(tr)
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = vm.Close() })
			svid, status := h.attestTPM(t, m.Token, vm, vm)
			g.Expect(status).To(Equal(tt.want))
			if tt.want == http.StatusOK {
				g.Expect(svid.ID).To(Equal(m.ID))
			} else {
				g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.JoinToken.RedeemedTime).To(BeNil(),
					"a refused EK certificate does not burn the token")
			}
		})
	}
}

func testCA(t *testing.T, name string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
