package tpm

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"

	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm/tpmtest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

func openDevice(t *testing.T) *agenttpm.Device {
	t.Helper()
	tr, err := agenttpm.Open(tpmtest.Start(t))
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

func TestCredentialChallengeNeedsTheEKsTPM(t *testing.T) {
	g := NewWithT(t)
	vm, other := openDevice(t), openDevice(t)
	const token = "hfjt_ns_name_0000"
	ev, err := vm.Evidence(token)
	g.Expect(err).NotTo(HaveOccurred())
	csr, err := identity.ParseCSRPEM(ev.CSR)
	g.Expect(err).NotTo(HaveOccurred(), "the TPM key signs the CSR")
	v, err := verifyEvidence(ev, token, csr)
	g.Expect(err).NotTo(HaveOccurred())

	secret, blob, enc, err := makeCredential(v)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := vm.ActivateCredential(blob, enc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(secret))

	_, err = other.ActivateCredential(blob, enc)
	g.Expect(err).To(HaveOccurred(), "another TPM cannot answer a challenge made for this EK")

	// The other TPM's AK and key presented with this VM's EK: the challenge names an AK that is
	// not in the EK's TPM, so neither TPM can answer it.
	forged, err := other.Evidence(token)
	g.Expect(err).NotTo(HaveOccurred())
	forged.EKPublic = ev.EKPublic
	forgedCSR, err := identity.ParseCSRPEM(forged.CSR)
	g.Expect(err).NotTo(HaveOccurred())
	fv, err := verifyEvidence(forged, token, forgedCSR)
	g.Expect(err).NotTo(HaveOccurred())
	_, blob, enc, err = makeCredential(fv)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = other.ActivateCredential(blob, enc)
	g.Expect(err).To(HaveOccurred())
	_, err = vm.ActivateCredential(blob, enc)
	g.Expect(err).To(HaveOccurred())
}

func TestEvidenceIsRefused(t *testing.T) {
	vm := openDevice(t)
	const token = "hfjt_ns_name_0000"
	good, err := vm.Evidence(token)
	if err != nil {
		t.Fatal(err)
	}
	goodCSR, _ := identity.ParseCSRPEM(good.CSR)
	_, softCSRPEM, _ := identity.NewKeyAndCSR()
	softCSR, _ := identity.ParseCSRPEM(softCSRPEM)
	tests := []struct {
		name   string
		mutate func(ev *protocol.TPMEvidence)
		token  string
		csr    any
	}{
		{name: "certification over another token", token: "hfjt_ns_name_1111"},
		{name: "CSR key outside the TPM", csr: softCSR},
		{name: "AK is the SVID key (not restricted)", mutate: func(ev *protocol.TPMEvidence) { ev.AKPublic = ev.KeyPublic }},
		{name: "certified key swapped for the AK", mutate: func(ev *protocol.TPMEvidence) { ev.KeyPublic = ev.AKPublic }},
		{name: "tampered certification", mutate: func(ev *protocol.TPMEvidence) {
			ev.CertifyInfo = bytes.Clone(ev.CertifyInfo)
			ev.CertifyInfo[len(ev.CertifyInfo)-1] ^= 1
		}},
		{name: "EK that is a signing key", mutate: func(ev *protocol.TPMEvidence) { ev.EKPublic = ev.AKPublic }},
		{name: "garbage", mutate: func(ev *protocol.TPMEvidence) { ev.CertifySignature = []byte{1, 2} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := *good
			if tt.mutate != nil {
				tt.mutate(&ev)
			}
			token := token
			if tt.token != "" {
				token = tt.token
			}
			csr := goodCSR
			if tt.csr != nil {
				csr = softCSR
			}
			_, err := verifyEvidence(&ev, token, csr)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}
