package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// clockSkew backdates certificates so a VM whose clock runs a little behind accepts them.
const clockSkew = 5 * time.Minute

// CA signs the X509-SVIDs of one trust domain. Its key pair is created once and shared by every
// bootstrap-service replica (see package builtin), so an SVID issued by one replica is accepted by
// all of them.
type CA struct {
	td      spiffeid.TrustDomain
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	now     func() time.Time
}

// NewCA generates a self-signed CA for td valid for validity, returning it with its PEM-encoded
// certificate and PKCS#8 key for storage.
func NewCA(td spiffeid.TrustDomain, validity time.Duration) (ca *CA, certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{"HyperFleet"}, CommonName: "HyperFleet bootstrap CA " + td.Name()},
		URIs:                  []*url.URL{td.ID().URL()},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	ca, err = LoadCA(td, certPEM, keyPEM)
	return ca, certPEM, keyPEM, err
}

// LoadCA parses a stored CA and checks that its key matches its certificate.
func LoadCA(td spiffeid.TrustDomain, certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("CA certificate: no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, errors.New("CA key does not match the CA certificate")
	}
	return &CA{td: td, cert: cert, certPEM: certPEM, key: key, now: time.Now}, nil
}

// TrustDomain is the trust domain the CA signs for.
func (ca *CA) TrustDomain() spiffeid.TrustDomain { return ca.td }

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// BundlePEM is the CA certificate in PEM: what VMs are given to verify the bootstrap service.
func (ca *CA) BundlePEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Bundle is the trust domain's X.509 bundle, for go-spiffe verification.
func (ca *CA) Bundle() *x509bundle.Bundle {
	return x509bundle.FromX509Authorities(ca.td, []*x509.Certificate{ca.cert})
}

// SignCSR issues an X509-SVID for id to the key in csr. Everything the CSR asks for except its
// public key is ignored: the CA alone decides the identity.
func (ca *CA) SignCSR(csr *x509.CertificateRequest, id spiffeid.ID, ttl time.Duration) ([]*x509.Certificate, error) {
	if err := CheckCSR(csr); err != nil {
		return nil, err
	}
	if id.TrustDomain() != ca.td {
		return nil, fmt.Errorf("SPIFFE ID %s is not in the CA's trust domain %s", id, ca.td)
	}
	cert, err := ca.issue(id, csr.PublicKey, ttl, nil, nil)
	if err != nil {
		return nil, err
	}
	return []*x509.Certificate{cert}, nil
}

// IssueServerSVID issues the bootstrap service its own SVID with a fresh key; dnsNames and ips are
// added so that clients verifying by host name also succeed.
func (ca *CA) IssueServerSVID(id spiffeid.ID, dnsNames []string, ips []net.IP, ttl time.Duration) (*x509svid.SVID, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cert, err := ca.issue(id, &key.PublicKey, ttl, dnsNames, ips)
	if err != nil {
		return nil, err
	}
	return &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{cert}, PrivateKey: key}, nil
}

func (ca *CA) issue(id spiffeid.ID, pub crypto.PublicKey, ttl time.Duration, dnsNames []string, ips []net.IP) (*x509.Certificate, error) {
	now := ca.now()
	notAfter := now.Add(ttl)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter // never outlive the CA
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		URIs:         []*url.URL{id.URL()},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// CheckCSR verifies a CSR's self-signature (proof the requester holds the key) and that its key is
// strong enough.
func CheckCSR(csr *x509.CertificateRequest) error {
	if csr == nil {
		return errors.New("no certificate signing request")
	}
	if err := csr.CheckSignature(); err != nil {
		return fmt.Errorf("certificate signing request signature: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 256 {
			return errors.New("ECDSA keys must be P-256 or stronger")
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return errors.New("RSA keys must have at least 2048 bits")
		}
	default:
		return fmt.Errorf("unsupported key type %T", csr.PublicKey)
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

// DeriveKey is a secret of purpose label derived from the CA's private key: every replica sharing
// the CA derives the same key, across restarts, and nobody without the CA key can.
func (ca *CA) DeriveKey(label string) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("deriving a key from the CA key: %w", err)
	}
	mac := hmac.New(sha256.New, der)
	mac.Write([]byte("hyperfleet derived key: " + label))
	return mac.Sum(nil), nil
}
