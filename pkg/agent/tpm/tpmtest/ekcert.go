package tpmtest

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
)

// StartWithEKCertificate starts a swtpm whose NV storage holds a certificate of its ECC P-256 EK
// issued by issuer, as a TPM manufacturer provisions one. With forKey set, the certificate is of
// that key instead of the TPM's own EK (a certificate copied from another TPM).
func StartWithEKCertificate(t testing.TB, issuer *x509.Certificate, issuerKey crypto.Signer, forKey crypto.PublicKey) string {
	t.Helper()
	addr := Start(t)
	tr, err := agenttpm.Open(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ek, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.ECCEKTemplate),
	}.Execute(tr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tpm2.FlushContext{FlushHandle: ek.ObjectHandle}.Execute(tr)
	pub, err := ek.OutPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	ekPub, err := tpm2.Pub(*pub)
	if err != nil {
		t.Fatal(err)
	}
	if forKey != nil {
		ekPub = forKey
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "swtpm EK"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageKeyAgreement,
	}, issuer, ekPub, issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	WriteNV(t, tr, agenttpm.ECCEKCertificateIndex, der)
	return addr
}

// WriteNV defines an owner-readable NV index holding data.
func WriteNV(t testing.TB, tr transport.TPM, index tpm2.TPMHandle, data []byte) {
	t.Helper()
	def := tpm2.NVDefineSpace{
		AuthHandle: tpm2.TPMRHOwner,
		PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
			NVIndex: index, NameAlg: tpm2.TPMAlgSHA256,
			Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthRead: true, NoDA: true, NT: tpm2.TPMNTOrdinary},
			DataSize:   uint16(len(data)),
		}),
	}
	if _, err := def.Execute(tr); err != nil {
		t.Fatalf("defining NV index %#x: %v", index, err)
	}
	pub, err := def.PublicInfo.Contents()
	if err != nil {
		t.Fatal(err)
	}
	name, err := tpm2.NVName(pub)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 512 {
		end := min(off+512, len(data))
		if _, err := (tpm2.NVWrite{
			AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: index, Name: *name},
			Data:       tpm2.TPM2BMaxNVBuffer{Buffer: data[off:end]},
			Offset:     uint16(off),
		}).Execute(tr); err != nil {
			t.Fatalf("writing NV index %#x: %v", index, err)
		}
	}
}
