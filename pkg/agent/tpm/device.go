package tpm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

// Device is a VM's TPM with the three keys of an attestation loaded: the endorsement key (EK), an
// attestation key (AK) and the SVID key. The keys are transient: they live as long as the
// connection (the kernel's resource manager flushes them when the agent exits).
type Device struct {
	tpm transport.TPMCloser
	ek  tpm2.NamedHandle
	ak  tpm2.NamedHandle
	key tpm2.NamedHandle

	ekPublic, akPublic, keyPublic []byte
	// ekCert is the manufacturer's certificate of the EK (DER), when the TPM has one.
	ekCert []byte
	pub    *ecdsa.PublicKey
}

// NewDevice creates the EK (TCG ECC P-256 template), a fresh AK and a fresh SVID key in t. It takes
// ownership of t: Close closes it.
func NewDevice(t transport.TPMCloser) (*Device, error) {
	d := &Device{tpm: t}
	template, cert, err := chooseEK(t)
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	d.ekCert = cert
	if d.ek, d.ekPublic, err = d.createPrimary(tpm2.TPMRHEndorsement, template); err != nil {
		return nil, errors.Join(fmt.Errorf("creating the endorsement key: %w", err), d.Close())
	}
	akTemplate, err := signingTemplate(true)
	if err == nil {
		d.ak, d.akPublic, err = d.createPrimary(tpm2.TPMRHOwner, akTemplate)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating the attestation key: %w", err), d.Close())
	}
	keyTemplate, err := signingTemplate(false)
	if err == nil {
		d.key, d.keyPublic, err = d.createPrimary(tpm2.TPMRHOwner, keyTemplate)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating the SVID key: %w", err), d.Close())
	}
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](d.keyPublic)
	if err == nil {
		d.pub, err = ecdsaPublic(pub)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reading the SVID key: %w", err), d.Close())
	}
	return d, nil
}

// signingTemplate is an ECDSA P-256/SHA-256 key that never leaves the TPM. The AK is restricted:
// it signs only digests the TPM computed itself, so what it signs was produced by the TPM. A random
// unique value makes each primary key fresh rather than derived again from the template.
func signingTemplate(restricted bool) (tpm2.TPMTPublic, error) {
	x, y := make([]byte, 32), make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, x); err != nil {
		return tpm2.TPMTPublic{}, err
	}
	if _, err := io.ReadFull(rand.Reader, y); err != nil {
		return tpm2.TPMTPublic{}, err
	}
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgECC,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM:            true,
			FixedParent:         true,
			SensitiveDataOrigin: true,
			UserWithAuth:        true,
			Restricted:          restricted,
			SignEncrypt:         true,
		},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256})},
			CurveID: tpm2.TPMECCNistP256,
			KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
			X: tpm2.TPM2BECCParameter{Buffer: x}, Y: tpm2.TPM2BECCParameter{Buffer: y}}),
	}, nil
}

func (d *Device) createPrimary(hierarchy tpm2.TPMHandle, template tpm2.TPMTPublic) (tpm2.NamedHandle, []byte, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: hierarchy, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(template),
	}.Execute(d.tpm)
	if err != nil {
		return tpm2.NamedHandle{}, nil, err
	}
	return tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name}, rsp.OutPublic.Bytes(), nil
}

// Evidence certifies the SVID key with the AK and returns it with a CSR signed by the SVID key.
func (d *Device) Evidence(joinToken string) (*protocol.TPMEvidence, error) {
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, d.Signer())
	if err != nil {
		return nil, fmt.Errorf("signing the CSR in the TPM: %w", err)
	}
	rsp, err := tpm2.Certify{
		ObjectHandle:   tpm2.AuthHandle{Handle: d.key.Handle, Name: d.key.Name, Auth: tpm2.PasswordAuth(nil)},
		SignHandle:     tpm2.AuthHandle{Handle: d.ak.Handle, Name: d.ak.Name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: protocol.CertifyQualifier(joinToken)},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
	}.Execute(d.tpm)
	if err != nil {
		return nil, fmt.Errorf("certifying the SVID key with the attestation key: %w", err)
	}
	return &protocol.TPMEvidence{
		EKCertificate:    d.ekCert,
		CSR:              pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}),
		EKPublic:         d.ekPublic,
		AKPublic:         d.akPublic,
		KeyPublic:        d.keyPublic,
		CertifyInfo:      rsp.CertifyInfo.Bytes(),
		CertifySignature: tpm2.Marshal(rsp.Signature),
	}, nil
}

// ActivateCredential recovers the secret of a credential challenge. Only the TPM holding both the
// EK the challenge was encrypted to and the AK it names can.
func (d *Device) ActivateCredential(credentialBlob, encryptedSecret []byte) ([]byte, error) {
	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: d.ak.Handle, Name: d.ak.Name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle: tpm2.AuthHandle{Handle: d.ek.Handle, Name: d.ek.Name,
			Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, endorsementPolicy)},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: credentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: encryptedSecret},
	}.Execute(d.tpm)
	if err != nil {
		return nil, fmt.Errorf("activating the credential: %w", err)
	}
	return rsp.CertInfo.Buffer, nil
}

// endorsementPolicy satisfies the TCG EK's policy, PolicySecret(TPM_RH_ENDORSEMENT).
func endorsementPolicy(t transport.TPM, session tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{
		AuthHandle:    tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		PolicySession: session,
		NonceTPM:      nonceTPM,
	}.Execute(t)
	return err
}

// Public is the SVID key's public key.
func (d *Device) Public() *ecdsa.PublicKey { return d.pub }

// Signer signs with the SVID key inside the TPM; the private key never leaves it.
func (d *Device) Signer() crypto.Signer { return &signer{d: d} }

// Close flushes the keys and closes the TPM.
func (d *Device) Close() error {
	var errs []error
	for _, h := range []tpm2.NamedHandle{d.key, d.ak, d.ek} {
		if h.Handle != 0 {
			if _, err := (tpm2.FlushContext{FlushHandle: h.Handle}).Execute(d.tpm); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(append(errs, d.tpm.Close())...)
}

type signer struct{ d *Device }

func (s *signer) Public() crypto.PublicKey { return s.d.pub }

// Sign signs a SHA-256 digest, as TLS 1.3 and X.509 ask of a P-256 key, and returns an ASN.1
// ECDSA signature like crypto/ecdsa does.
func (s *signer) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.SHA256 || len(digest) != sha256.Size {
		return nil, fmt.Errorf("the TPM key signs SHA-256 digests only, not %v", opts.HashFunc())
	}
	rsp, err := tpm2.Sign{
		KeyHandle:  tpm2.AuthHandle{Handle: s.d.key.Handle, Name: s.d.key.Name, Auth: tpm2.PasswordAuth(nil)},
		Digest:     tpm2.TPM2BDigest{Buffer: digest},
		InScheme:   tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		Validation: tpm2.TPMTTKHashCheck{Tag: tpm2.TPMSTHashCheck, Hierarchy: tpm2.TPMRHNull},
	}.Execute(s.d.tpm)
	if err != nil {
		return nil, fmt.Errorf("signing in the TPM: %w", err)
	}
	sig, err := rsp.Signature.Signature.ECDSA()
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(struct{ R, S *big.Int }{
		new(big.Int).SetBytes(sig.SignatureR.Buffer), new(big.Int).SetBytes(sig.SignatureS.Buffer)})
}

func ecdsaPublic(pub *tpm2.TPMTPublic) (*ecdsa.PublicKey, error) {
	parms, err := pub.Parameters.ECCDetail()
	if err != nil {
		return nil, err
	}
	point, err := pub.Unique.ECC()
	if err != nil {
		return nil, err
	}
	return tpm2.ECDSAPub(parms, point)
}

// EKSHA256 is the hex SHA-256 of the EK's public key (PKIX DER): what an operator enrols.
func (d *Device) EKSHA256() string {
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](d.ekPublic)
	if err != nil {
		return ""
	}
	key, err := tpm2.Pub(*pub)
	if err != nil {
		return ""
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
