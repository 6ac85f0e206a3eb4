package tpm

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
)

// verifyEKCertificate checks the EK certificate a VM presented, when the service has EK roots: it
// must chain to them and certify the very EK the challenge is encrypted to. Without roots a
// certificate proves nothing and is ignored; RequireEKCertificate makes one mandatory.
func (a *Attestor) verifyEKCertificate(der []byte, v *verified) error {
	if a.EKRoots == nil {
		return nil
	}
	if len(der) == 0 {
		if a.RequireEKCertificate {
			return errors.New("an EK certificate is required and the TPM presented none")
		}
		return nil
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("EK certificate: %w", err)
	}
	// TCG EK certificates mark their subject alternative name (the TPM's manufacturer and model)
	// critical with an empty subject; they say nothing Go must enforce beyond the chain.
	cert.UnhandledCriticalExtensions = nil
	if _, err := cert.Verify(x509.VerifyOptions{Roots: a.EKRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("EK certificate does not chain to the configured EK roots: %w", err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(v.ekPub) {
		return errors.New("EK certificate is for another key than the TPM's EK")
	}
	return nil
}
