package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// NewKeyAndCSR generates the key a VM keeps in memory and a PEM certificate signing request for
// it. The CSR asks for nothing: the CA decides the identity from the attestation.
func NewKeyAndCSR() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCSRPEM parses a PEM certificate signing request and verifies its signature.
func ParseCSRPEM(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no CERTIFICATE REQUEST PEM block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	return csr, CheckCSR(csr)
}

// EncodeCertificates renders a chain as concatenated PEM blocks, leaf first.
func EncodeCertificates(chain []*x509.Certificate) []byte {
	var out []byte
	for _, c := range chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// SVIDFromPEM pairs an issued PEM chain with the key that requested it, checking that they match
// and that the leaf is a valid X509-SVID.
func SVIDFromPEM(chainPEM []byte, key crypto.Signer) (*x509svid.SVID, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	var raw []byte
	for rest := chainPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		raw = append(raw, block.Bytes...)
	}
	svid, err := x509svid.ParseRaw(raw, keyDER)
	if err != nil {
		return nil, fmt.Errorf("issued SVID: %w", err)
	}
	return svid, nil
}
