package fakeserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"time"
)

// Listen listens on addr ("" means 127.0.0.1:0). With useTLS it serves a one-day self-signed
// certificate named commonName for the listener's IP and localhost, and returns that
// certificate's PEM for clients to trust. url is the listener's http:// or https:// root.
func Listen(addr string, useTLS bool, commonName string) (l net.Listener, url string, caPEM []byte, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if l, err = net.Listen("tcp", addr); err != nil {
		return nil, "", nil, err
	}
	if !useTLS {
		return l, "http://" + l.Addr().String(), nil, nil
	}
	cert, caPEM, err := SelfSigned(l.Addr(), commonName)
	if err != nil {
		_ = l.Close()
		return nil, "", nil, err
	}
	l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return l, "https://" + l.Addr().String(), caPEM, nil
}

// TrustingTransport is a transport that trusts only caPEM.
func TrustingTransport(caPEM []byte) (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// SelfSigned makes a CA certificate named commonName for addr's IP, the loopback addresses and
// localhost, valid for ten years (a local fleet may run for days); it returns the key pair and the
// certificate's PEM.
func SelfSigned(addr net.Addr, commonName string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, tcp.IP)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}
