package service_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm/tpmtest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
)

// attestMethod is one way for a VM to attest. forge makes the proof beyond the token wrong: a
// forged token secret for JoinToken, a second TPM answering the challenge for TPM.
type attestMethod struct {
	name   string
	method bootstrapv1.AttestationMethod
	attest func(t *testing.T, h *harness, m *bootstraptest.Machine, token string, forge bool) (*x509svid.SVID, int)
}

var attestMethods = []attestMethod{
	{name: "builtin", method: bootstrapv1.AttestationJoinToken,
		attest: func(t *testing.T, h *harness, m *bootstraptest.Machine, token string, forge bool) (*x509svid.SVID, int) {
			if forge {
				token = token[:len(token)-4] + "0000"
			}
			return h.attest(t, token)
		}},
	{name: "tpm", method: bootstrapv1.AttestationTPM,
		attest: func(t *testing.T, h *harness, m *bootstraptest.Machine, token string, forge bool) (*x509svid.SVID, int) {
			vm := openTPM(t)
			answerer := vm
			if forge {
				answerer = openTPM(t)
			}
			return h.attestTPM(t, token, vm, answerer)
		}},
}

// TestAttestationMethods runs the same cases against join-token and TPM attestation.
func TestAttestationMethods(t *testing.T) {
	h := startService(t)
	tests := []struct {
		name string
		ttl  time.Duration
		// other attests with the other method's endpoint: the token alone must not be enough for
		// a TPM config, and TPM evidence is not accepted for a join-token config.
		other  bool
		forge  bool
		before func(t *testing.T, am attestMethod, m *bootstraptest.Machine)
		want   int
	}{
		{name: "fresh token is redeemed and yields the Machine's SVID", ttl: time.Minute, want: http.StatusOK},
		{name: "second use is refused", ttl: time.Minute, want: http.StatusConflict,
			before: func(t *testing.T, am attestMethod, m *bootstraptest.Machine) {
				_, status := am.attest(t, h, m, m.Token, false)
				NewWithT(t).Expect(status).To(Equal(http.StatusOK))
			}},
		{name: "expired token is refused", ttl: -time.Second, want: http.StatusGone},
		{name: "forged proof is refused", ttl: time.Minute, forge: true, want: http.StatusUnauthorized},
		{name: "the other method's endpoint is refused", ttl: time.Minute, other: true, want: http.StatusUnauthorized},
		{name: "token of a deleted Machine is refused", ttl: time.Minute, want: http.StatusForbidden,
			before: func(t *testing.T, _ attestMethod, m *bootstraptest.Machine) {
				NewWithT(t).Expect(env.Client.Delete(context.Background(), m.Machine)).To(Succeed())
			}},
	}
	for mi, am := range attestMethods {
		t.Run(am.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					g := NewWithT(t)
					m := h.machine(t, am.name+"-"+string(rune('a'+i)), tt.ttl)
					setMethod(t, m, am.method)
					if tt.before != nil {
						tt.before(t, am, m)
					}
					via := am
					if tt.other {
						via = attestMethods[1-mi]
					}
					svid, status := via.attest(t, h, m, m.Token, tt.forge)
					g.Expect(status).To(Equal(tt.want))
					if tt.want != http.StatusOK {
						return
					}
					g.Expect(svid.ID).To(Equal(m.ID))
					g.Expect(svid.ID.String()).To(Equal("spiffe://hyperfleet.test/hyperfleet/machine/" + h.fleet.Namespace + "/" + m.Machine.Name))
					cfg := bootstraptest.Get(t, env.Client, m.Config)
					g.Expect(cfg.Status.JoinToken.RedeemedTime).NotTo(BeNil(), "redemption is recorded in the API server")
					if am.method == bootstrapv1.AttestationTPM {
						g.Expect(cfg.Status.AttestedTPM).NotTo(BeNil(), "the TPM's endorsement key is on record")
						g.Expect(cfg.Status.AttestedTPM.EKSHA256).To(MatchRegexp(`^[a-f0-9]{64}$`))
					} else {
						g.Expect(cfg.Status.AttestedTPM).To(BeNil(), "no TPM took part")
					}
					// The SVID works for mTLS, with the key in the TPM for method TPM.
					status, rc, err := h.runnerConfig(h.mtls(svid))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(status).To(Equal(http.StatusOK))
					g.Expect(rc.RunnerName).To(Equal(m.Machine.Name))
				})
			}
		})
	}
}

// TestTPMChallengeIsAnsweredOnceAndLeavesNoState replays a genuine answer (same state, same
// secret), one after the other and all at once: exactly one SVID comes of it, and the service
// keeps nothing of the challenge in its namespace but its CA Secret.
func TestTPMChallengeIsAnsweredOnceAndLeavesNoState(t *testing.T) {
	h := startService(t)
	for _, tt := range []struct {
		name       string
		concurrent int
	}{{name: "replayed after the answer"}, {name: "four answers at once", concurrent: 4}} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			a := h.answeredChallenge(t, "tpm-once-"+strconv.Itoa(tt.concurrent))
			m, vm, ch, secret := a.m, a.vm, a.ch, a.answer
			if tt.concurrent == 0 {
				_, status := h.tpmActivate(t, ch, secret, vm)
				g.Expect(status).To(Equal(http.StatusOK))
				svid, status := h.tpmActivate(t, ch, secret, vm)
				g.Expect(status).To(Equal(http.StatusConflict), "a replayed answer is spent")
				g.Expect(svid).To(BeNil())
			} else {
				var wg sync.WaitGroup
				var issued atomic.Int32
				for range tt.concurrent {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := h.tpm.Activate(ctx, ch.ChallengeID, ch.State, secret); err == nil {
							issued.Add(1)
						} else if !errors.Is(err, identity.ErrAlreadyRedeemed) {
							t.Errorf("a concurrent answer failed otherwise than as already answered: %v", err)
						}
					}()
				}
				wg.Wait()
				g.Expect(issued.Load()).To(Equal(int32(1)), "exactly one SVID for one challenge")
			}
			cfg := bootstraptest.Get(t, env.Client, m.Config)
			g.Expect(conditions.GetReason(cfg, bootstrapv1.AttestedCondition)).To(Equal(tpm.CredentialActivatedReason))
			secrets := &corev1.SecretList{}
			g.Expect(env.Client.List(ctx, secrets, client.InNamespace(h.caKey.Namespace))).To(Succeed())
			g.Expect(secrets.Items).To(HaveLen(1), "no challenge state is stored")
			g.Expect(secrets.Items[0].Name).To(Equal(h.caKey.Name))
		})
	}
}

func TestTPMEnrolledEndorsementKey(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.tpmMachine(t, "tpm-enrolled")
	vm, other := openTPM(t), openTPM(t)
	cfg := bootstraptest.Get(t, env.Client, m.Config)
	cfg.Annotations = map[string]string{tpm.EKSHA256Annotation: vm.EKSHA256()}
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())
	_, status := h.attestTPM(t, m.Token, other, other)
	g.Expect(status).To(Equal(http.StatusUnauthorized), "a TPM other than the enrolled one is refused")
	svid, status := h.attestTPM(t, m.Token, vm, vm)
	g.Expect(status).To(Equal(http.StatusOK), "and its attempt did not burn the token")
	g.Expect(svid.ID).To(Equal(m.ID))
	cfg = bootstraptest.Get(t, env.Client, m.Config)
	g.Expect(cfg.Status.AttestedTPM).To(Equal(&bootstrapv1.AttestedTPM{EKSHA256: vm.EKSHA256()}),
		"the status names the endorsement key that answered, for the job's record")
}

func setMethod(t *testing.T, m *bootstraptest.Machine, method bootstrapv1.AttestationMethod) {
	t.Helper()
	cfg := bootstraptest.Get(t, env.Client, m.Config)
	cfg.Spec.Attestation.Method = method
	if err := env.Client.Update(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// tpmMachine is a Machine whose BootstrapConfig asks for TPM attestation.
func (h *harness) tpmMachine(t *testing.T, name string) *bootstraptest.Machine {
	t.Helper()
	m := h.machine(t, name, time.Minute)
	setMethod(t, m, bootstrapv1.AttestationTPM)
	return m
}

// answeredChallenge is a TPM Machine whose VM has had its challenge and decrypted the answer,
// which it has not sent yet.
type answeredChallenge struct {
	m      *bootstraptest.Machine
	vm     *agenttpm.Device
	ch     *protocol.TPMChallenge
	answer []byte
}

// answeredChallenge runs the first attestation step for a new TPM Machine and has its TPM
// decrypt the answer.
func (h *harness) answeredChallenge(t *testing.T, name string) answeredChallenge {
	t.Helper()
	g := NewWithT(t)
	m := h.tpmMachine(t, name)
	vm := openTPM(t)
	ch, status := h.tpmChallenge(t, m.Token, vm)
	g.Expect(status).To(Equal(http.StatusOK))
	answer, err := vm.ActivateCredential(ch.CredentialBlob, ch.EncryptedSecret)
	g.Expect(err).NotTo(HaveOccurred())
	return answeredChallenge{m: m, vm: vm, ch: ch, answer: answer}
}

// openTPM opens a fresh swtpm.
func openTPM(t *testing.T) *agenttpm.Device {
	t.Helper()
	return openTPMAt(t, tpmtest.Start(t))
}

// openTPMAt opens the TPM listening at addr, closed when the test ends.
func openTPMAt(t *testing.T, addr string) *agenttpm.Device {
	t.Helper()
	tr, err := agenttpm.Open(addr)
	if err != nil {
		t.Fatal(err)
	}
	d, err := agenttpm.NewDevice(tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// attestTPM runs both steps with vm's evidence; answerer's TPM answers the challenge.
func (h *harness) attestTPM(t *testing.T, token string, vm, answerer *agenttpm.Device) (*x509svid.SVID, int) {
	t.Helper()
	ch, status := h.tpmChallenge(t, token, vm)
	if status != http.StatusOK {
		return nil, status
	}
	secret, err := answerer.ActivateCredential(ch.CredentialBlob, ch.EncryptedSecret)
	if err != nil {
		// Another TPM cannot decrypt the challenge: all it can send is a guess.
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	return h.tpmActivate(t, ch, secret, vm)
}

func (h *harness) tpmChallenge(t *testing.T, token string, vm *agenttpm.Device) (*protocol.TPMChallenge, int) {
	t.Helper()
	ev, err := vm.Evidence(token)
	if err != nil {
		t.Fatal(err)
	}
	ch := &protocol.TPMChallenge{}
	status := h.post(t, protocol.TPMAttestPath, protocol.TPMAttestRequest{JoinToken: token, CSR: string(ev.CSR),
		EKPublic: ev.EKPublic, AKPublic: ev.AKPublic, KeyPublic: ev.KeyPublic,
		CertifyInfo: ev.CertifyInfo, CertifySignature: ev.CertifySignature, EKCertificate: ev.EKCertificate}, ch)
	return ch, status
}

func (h *harness) tpmActivate(t *testing.T, ch *protocol.TPMChallenge, secret []byte, vm *agenttpm.Device) (*x509svid.SVID, int) {
	t.Helper()
	var out protocol.AttestResponse
	status := h.post(t, protocol.TPMActivatePath, protocol.TPMActivateRequest{ChallengeID: ch.ChallengeID, Secret: secret, State: ch.State}, &out)
	if status != http.StatusOK {
		return nil, status
	}
	var chain []*x509.Certificate
	for rest := []byte(out.SVID); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 || !vm.Public().Equal(chain[0].PublicKey) {
		t.Fatal("the SVID is not issued to the TPM-resident key")
	}
	id, err := x509svid.IDFromCert(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	return &x509svid.SVID{ID: id, Certificates: chain, PrivateKey: vm.Signer()}, status
}

// post sends v as JSON and decodes a 200 answer into out.
func (h *harness) post(t *testing.T, path string, v, out any) int {
	t.Helper()
	body, _ := json.Marshal(v)
	resp, err := h.client.Post(h.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
