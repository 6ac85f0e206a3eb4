package vspheresim

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"time"
)

// The simulator is served through a front of its own: HTTPS with a CA made for this simulator
// (vcsim's own server uses Go's one test certificate, which every vcsim shares), a count of the
// SOAP methods clients call, for the calls a VM's life costs, and vCenter's refusals vcsim lacks.

// soapMethod finds the method of a SOAP request: the first element inside the Body.
var soapMethod = regexp.MustCompile(`<(?:[A-Za-z0-9]+:)?Body[^>]*>\s*<(?:[A-Za-z0-9]+:)?([A-Za-z0-9_]+)`)

func (s *Simulator) serveFront(handler http.Handler, listen string) error {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	caPEM, cert, err := selfSignedTLS()
	if err != nil {
		return err
	}
	s.front = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if m := soapMethod.FindSubmatch(body); m != nil {
				s.callsMu.Lock()
				s.calls[string(m[1])]++
				s.callsMu.Unlock()
				s.refuseDestroyingUsedPortgroup(string(m[1]), body)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		handler.ServeHTTP(w, r)
	}))
	s.front.Listener.Close()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	s.front.Listener = l
	s.front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.front.StartTLS()
	s.URL, s.CA = s.front.URL, caPEM
	return nil
}

// Calls returns the SOAP methods clients called since the last ResetCalls, by name.
func (s *Simulator) Calls() map[string]int {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// ResetCalls forgets the calls counted so far.
func (s *Simulator) ResetCalls() {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	s.calls = map[string]int{}
}

// selfSignedTLS makes a CA and a certificate it signs for 127.0.0.1 and localhost.
func selfSignedTLS() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vCenter simulator CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "vcenter.local"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, nil
}
