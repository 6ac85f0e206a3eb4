package platform

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
)

// MarkTLS returns err marked as ErrTLS when it is a failed TLS handshake or certificate
// verification (the server was not the one the CA bundle or the system roots vouch for), and err
// unchanged otherwise. The mark keeps the cause's message.
func MarkTLS(err error) error {
	if err != nil && isTLSError(err) {
		return tlsRefused{err}
	}
	return err
}

// tlsRefused marks a failed TLS handshake or certificate check as ErrTLS.
type tlsRefused struct{ error }

func (e tlsRefused) Unwrap() error        { return e.error }
func (e tlsRefused) Is(target error) bool { return target == ErrTLS }

// isTLSError reports whether err is a failed TLS handshake or certificate verification.
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) || errors.As(err, &alert)
}

// TransportWithCA returns a copy of base (http.DefaultTransport when nil) that trusts only the
// certificates of caPEM, every block of which must be a parsable CERTIFICATE, and always
// verifies the server. The GitLab and Buildkite clients put every API call through it.
func TransportWithCA(base http.RoundTripper, caPEM []byte) (*http.Transport, error) {
	roots := x509.NewCertPool()
	n := 0
	for rest := caPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("%w: data after the last PEM block is not PEM", ErrCABundle)
			}
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if block.Type != "CERTIFICATE" || err != nil {
			return nil, fmt.Errorf("%w: PEM block %d is not a usable CERTIFICATE", ErrCABundle, n+1)
		}
		roots.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrCABundle)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	tr, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("cannot set a CA bundle on a %T transport", base)
	}
	tr = tr.Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return tr, nil
}
