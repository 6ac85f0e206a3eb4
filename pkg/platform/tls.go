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

// ParseCABundle parses a PEM bundle of CA certificates. Every block must be a CERTIFICATE that
// parses, so a truncated or mistyped bundle is reported instead of silently trusting less. Its
// errors match ErrCABundle.
func ParseCABundle(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("%w: data after the last PEM block is not PEM", ErrCABundle)
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: PEM block %d is a %s, not a CERTIFICATE", ErrCABundle, n+1, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrCABundle, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrCABundle)
	}
	return pool, nil
}

// TransportWithCA returns a copy of base (http.DefaultTransport when nil) that trusts only the
// certificates of caPEM (see ParseCABundle) and always verifies the server. Every CI platform's
// API calls (GitHub's App-token requests included) go through it when a pool names a CA bundle.
func TransportWithCA(base http.RoundTripper, caPEM []byte) (*http.Transport, error) {
	roots, err := ParseCABundle(caPEM)
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	tr, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("cannot set a CA bundle on a %T transport", base)
	}
	tr = tr.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = roots
	tr.TLSClientConfig.InsecureSkipVerify = false
	tr.TLSClientConfig.MinVersion = max(tr.TLSClientConfig.MinVersion, tls.VersionTLS12)
	return tr, nil
}

// IsTLSError reports whether err is (or wraps) a failed TLS handshake or certificate
// verification: the server was not the one the CA bundle or the system roots vouch for, and no
// request was sent.
func IsTLSError(err error) bool { return err != nil && isTLSError(err) }
