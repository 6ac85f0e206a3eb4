package service_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm/tpmtest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
)

// secretWriter is a client for a user who may write Secrets in each of namespaces, and read them
// in none: reading the service's would hand them the CA key itself (RBAC is on in the test API
// server).
func secretWriter(t *testing.T, name string, namespaces ...string) client.Client {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	user := "secret-writer-" + name
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
				Verbs: []string{"create", "update", "patch", "delete"}}}}
		g.Expect(env.Client.Create(ctx, role)).To(Succeed())
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-writer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestTPMForgedChallengeIsRefused plays a user who may write Secrets in the runner namespace and in
// the service's own, but holds neither the join token nor the TPM: they write challenge state of
// their own making where the service once kept it, and answer with state they made up. No SVID
// may come of it, and the token stays unspent.
func TestTPMForgedChallengeIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := startService(t)
	m := h.tpmMachine(t, "tpm-forged")
	attacker := secretWriter(t, "forger", h.fleet.Namespace, h.caKey.Namespace)
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
	// Under every name any version of the service used, in both namespaces.
	for _, key := range []client.ObjectKey{{Namespace: cfg.Namespace, Name: cfg.Name + "-tpm-challenge"},
		{Namespace: cfg.Namespace, Name: "tpm-challenge-" + string(cfg.UID)}, {Namespace: h.caKey.Namespace, Name: "tpm-challenge-" + string(cfg.UID)}} {
		g.Expect(attacker.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type: "bootstrap.hyperfleet.io/tpm-challenge", Data: data})).To(Succeed())
	}
	// State in the sealed format under keys the attacker can have: none, a guessed one, and the
	// key of a CA of their own.
	guessed := make([]byte, 1+12+400)
	guessed[0] = 1
	_, _ = rand.Read(guessed[1:])
	states := map[string][]byte{"no state": nil, "random state": guessed, "old MAC as state": []byte("guessed")}
	for name, state := range states {
		var out protocol.AttestResponse
		status := h.post(t, protocol.TPMActivatePath, protocol.TPMActivateRequest{ChallengeID: challengeID, Secret: answer, State: state}, &out)
		g.Expect(status).To(Equal(http.StatusUnauthorized), name)
		g.Expect(out.SVID).To(BeEmpty(), "no SVID for forged challenge state")
	}
	g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.JoinToken.RedeemedTime).To(BeNil(), "the token is untouched")

	// The real VM still attests.
	vm := openTPM(t)
	svid, status := h.attestTPM(t, m.Token, vm, vm)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(svid.ID).To(Equal(m.ID))
}

// TestTPMChallengeStateIsAuthenticated plays the VM (or anyone on its path) editing the sealed
// state it carries, e.g. to move its expiry or the config it names: every single-bit change of
// every byte is refused, and the untouched state still works afterwards.
func TestTPMChallengeStateIsAuthenticated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := startService(t)
	a := h.answeredChallenge(t, "tpm-tampered")
	m, vm, ch, secret := a.m, a.vm, a.ch, a.answer

	tampered := [][]byte{ch.State[:len(ch.State)-1], append(bytes.Clone(ch.State), 0), ch.State[1:]}
	for i := range ch.State {
		for _, bit := range []byte{0x01, 0x80} {
			s := bytes.Clone(ch.State)
			s[i] ^= bit
			tampered = append(tampered, s)
		}
	}
	for i, s := range tampered {
		_, err := h.tpm.Activate(ctx, ch.ChallengeID, s, secret)
		g.Expect(errors.Is(err, identity.ErrInvalidEvidence)).To(BeTrue(), "tampered state %d was not refused as forged: %v", i, err)
	}
	svid, status := h.tpmActivate(t, ch, secret, vm)
	g.Expect(status).To(Equal(http.StatusOK), "the genuine state still works")
	g.Expect(svid.ID).To(Equal(m.ID))
}

// TestTPMChallengeStateIsBoundToItsConfig plays the owner of one VM (its token, its TPM) who also
// holds another VM's challenge ID: their state does not answer for the other BootstrapConfig, nor
// for their own once it was recreated or given a new token, nor when another installation opens it
// or after its expiry.
func TestTPMChallengeStateIsBoundToItsConfig(t *testing.T) {
	var clock atomic.Int64 // seconds added to the attestor's clock
	h := startServiceWith(t, func(a *tpm.Attestor) {
		a.Now = func() time.Time { return time.Now().Add(time.Duration(clock.Load()) * time.Second) }
	})
	other := startService(t) // a second installation, its own CA, on the same cluster
	ctx := context.Background()
	for i, tt := range []struct {
		name string
		// attack answers a's challenge, with b's help, and returns the attestor's verdict.
		attack func(a, b answeredChallenge) error
		want   error
	}{
		{name: "another config's ID with my state and answer", want: identity.ErrInvalidEvidence,
			attack: func(a, b answeredChallenge) error {
				_, err := h.tpm.Activate(ctx, b.ch.ChallengeID, a.ch.State, a.answer)
				return err
			}},
		{name: "my state after my config's join token was replaced", want: identity.ErrInvalidEvidence,
			attack: func(a, _ answeredChallenge) error {
				cfg := bootstraptest.Get(t, env.Client, a.m.Config)
				cfg.Status.JoinToken.SHA256 = strings.Repeat("0", 64)
				if err := env.Client.Status().Update(ctx, cfg); err != nil {
					return err
				}
				_, err := h.tpm.Activate(ctx, a.ch.ChallengeID, a.ch.State, a.answer)
				return err
			}},
		{name: "another installation opens my state", want: identity.ErrInvalidEvidence,
			attack: func(a, _ answeredChallenge) error {
				_, err := other.tpm.Activate(ctx, a.ch.ChallengeID, a.ch.State, a.answer)
				return err
			}},
		{name: "config deleted and recreated under its name", want: identity.ErrInvalidEvidence,
			attack: func(a, _ answeredChallenge) error {
				old := bootstraptest.Get(t, env.Client, a.m.Config)
				if err := env.Client.Delete(ctx, old); err != nil {
					return err
				}
				fresh := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name,
					Labels: old.Labels, OwnerReferences: old.OwnerReferences}, Spec: old.Spec}
				if err := env.Client.Create(ctx, fresh); err != nil {
					return err
				}
				fresh.Status = old.Status
				if err := env.Client.Status().Update(ctx, fresh); err != nil {
					return err
				}
				_, err := h.tpm.Activate(ctx, a.ch.ChallengeID, a.ch.State, a.answer)
				return err
			}},
		{name: "answered after its expiry", want: identity.ErrExpired,
			attack: func(a, _ answeredChallenge) error {
				clock.Store(int64(tpm.DefaultChallengeTTL/time.Second) + 1)
				defer clock.Store(0)
				_, err := h.tpm.Activate(ctx, a.ch.ChallengeID, a.ch.State, a.answer)
				return err
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a, b := h.answeredChallenge(t, "tpm-bound-a-"+strconv.Itoa(i)), h.answeredChallenge(t, "tpm-bound-b-"+strconv.Itoa(i))
			err := tt.attack(a, b)
			g.Expect(errors.Is(err, tt.want)).To(BeTrue(), "want %v, got %v", tt.want, err)
			// b was not spent by the attack: its own VM still gets its SVID.
			svid, status := h.tpmActivate(t, b.ch, b.answer, b.vm)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(svid.ID).To(Equal(b.m.ID))
		})
	}
}

// TestTPMChallengeSurvivesRestart: the state is opened by any replica with the CA, here one
// started after the challenge was made, from the CA Secret alone.
func TestTPMChallengeSurvivesRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := startService(t)
	a := h.answeredChallenge(t, "tpm-restart")
	m, vm, ch, answer := a.m, a.vm, a.ch, a.answer

	ca, err := builtin.LoadOrCreateCA(ctx, env.Client, h.caKey, td)
	g.Expect(err).NotTo(HaveOccurred())
	restarted := &tpm.Attestor{Client: env.Client, CA: ca}
	attested, err := restarted.Activate(ctx, ch.ChallengeID, ch.State, answer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(attested.ID).To(Equal(m.ID))
	g.Expect(vm.Public().Equal(attested.Chain[0].PublicKey)).To(BeTrue(), "the SVID is for the key sealed in the state")
}

// TestTPMEnrolmentIsCheckedAtActivation: a TPM other than the enrolled one gets no SVID, even when
// the enrolment lands between the two steps.
func TestTPMEnrolmentIsCheckedAtActivation(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.tpmMachine(t, "tpm-enrol-late")
	impostor, enrolled := openTPM(t), openTPM(t)
	ch, status := h.tpmChallenge(t, m.Token, impostor)
	g.Expect(status).To(Equal(http.StatusOK))

	cfg := bootstraptest.Get(t, env.Client, m.Config)
	cfg.Annotations = map[string]string{tpm.EKSHA256Annotation: enrolled.EKSHA256()}
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())

	secret, err := impostor.ActivateCredential(ch.CredentialBlob, ch.EncryptedSecret)
	g.Expect(err).NotTo(HaveOccurred())
	svid, status := h.tpmActivate(t, ch, secret, impostor)
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
			m := h.tpmMachine(t, "tpm-localca")
			vm := openTPMAt(t, addr)
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
			m := h.tpmMachine(t, "tpm-ekcert-"+string(rune('a'+i)))
			vm := openTPMAt(t, tt.tpm(t))
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
