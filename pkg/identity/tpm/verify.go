package tpm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

// secretSize is the size of the credential challenge's secret.
const secretSize = 32

// verified is evidence whose TPM structures all check out.
type verified struct {
	ek       *tpm2.TPMTPublic
	ekPub    crypto.PublicKey
	akName   []byte
	ekSHA256 string // hex SHA-256 of the EK's PKIX public key, for logs and enrolment
}

// verifyEvidence checks everything that needs no TPM and no API server: that the AK is a
// restricted, non-exportable signing key; that it certified a non-exportable, unrestricted signing
// key (over the join token, so the certification is fresh); and that this key is the CSR's key.
// Whether the AK really lives in the EK's TPM is what the credential challenge then proves.
func verifyEvidence(ev *protocol.TPMEvidence, joinToken string, csr *x509.CertificateRequest) (*verified, error) {
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](ev.EKPublic)
	if err != nil {
		return nil, fmt.Errorf("EK public area: %w", err)
	}
	if a := ek.ObjectAttributes; !a.FixedTPM || !a.FixedParent || !a.Restricted || !a.Decrypt || a.SignEncrypt {
		return nil, errors.New("EK is not a restricted, non-duplicable decryption key")
	}
	ekPub, err := tpm2.Pub(*ek)
	if err != nil {
		return nil, fmt.Errorf("EK public key: %w", err)
	}
	ekDER, err := x509.MarshalPKIXPublicKey(ekPub)
	if err != nil {
		return nil, fmt.Errorf("EK public key: %w", err)
	}
	if _, err := tpm2.ImportEncapsulationKey(ek); err != nil {
		return nil, fmt.Errorf("EK cannot protect a credential: %w", err)
	}

	ak, akName, err := signingKey(ev.AKPublic, true)
	if err != nil {
		return nil, fmt.Errorf("AK: %w", err)
	}
	key, keyName, err := signingKey(ev.KeyPublic, false)
	if err != nil {
		return nil, fmt.Errorf("SVID key: %w", err)
	}

	attest, err := tpm2.Unmarshal[tpm2.TPMSAttest](ev.CertifyInfo) // checks TPM_GENERATED_VALUE
	if err != nil {
		return nil, fmt.Errorf("certification: %w", err)
	}
	if attest.Type != tpm2.TPMSTAttestCertify {
		return nil, errors.New("certification is not a TPM2_Certify")
	}
	if !bytes.Equal(attest.ExtraData.Buffer, protocol.CertifyQualifier(joinToken)) {
		return nil, errors.New("certification is not qualified with this join token")
	}
	info, err := attest.Attested.Certify()
	if err != nil {
		return nil, fmt.Errorf("certification: %w", err)
	}
	if !bytes.Equal(info.Name.Buffer, keyName) {
		return nil, errors.New("certification is of another key")
	}
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](ev.CertifySignature)
	if err != nil {
		return nil, fmt.Errorf("certification signature: %w", err)
	}
	if err := verifyECDSA(ak, ev.CertifyInfo, sig); err != nil {
		return nil, fmt.Errorf("certification signature: %w", err)
	}
	if !key.Equal(csr.PublicKey) {
		return nil, errors.New("the CSR's key is not the certified TPM key")
	}
	sum := sha256.Sum256(ekDER)
	return &verified{ek: ek, ekPub: ekPub, akName: akName, ekSHA256: fmt.Sprintf("%x", sum)}, nil
}

// signingKey parses a P-256 ECDSA key that cannot leave its TPM and returns it with its Name.
func signingKey(public []byte, restricted bool) (*ecdsa.PublicKey, []byte, error) {
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](public)
	if err != nil {
		return nil, nil, fmt.Errorf("public area: %w", err)
	}
	a := pub.ObjectAttributes
	if !a.FixedTPM || !a.FixedParent || !a.SensitiveDataOrigin || !a.SignEncrypt || a.Decrypt || a.Restricted != restricted {
		return nil, nil, fmt.Errorf("must be a TPM-generated, non-duplicable signing key (restricted=%t)", restricted)
	}
	if pub.Type != tpm2.TPMAlgECC || pub.NameAlg != tpm2.TPMAlgSHA256 {
		return nil, nil, errors.New("must be an ECC key named with SHA-256")
	}
	parms, err := pub.Parameters.ECCDetail()
	if err != nil {
		return nil, nil, err
	}
	if parms.CurveID != tpm2.TPMECCNistP256 {
		return nil, nil, errors.New("must be on curve P-256")
	}
	point, err := pub.Unique.ECC()
	if err != nil {
		return nil, nil, err
	}
	key, err := tpm2.ECDSAPub(parms, point)
	if err != nil {
		return nil, nil, err
	}
	name, err := tpm2.ObjectName(pub)
	if err != nil {
		return nil, nil, err
	}
	return key, name.Buffer, nil
}

// verifyECDSA checks a TPM ECDSA/SHA-256 signature over data.
func verifyECDSA(key *ecdsa.PublicKey, data []byte, sig *tpm2.TPMTSignature) error {
	if sig.SigAlg != tpm2.TPMAlgECDSA {
		return errors.New("not an ECDSA signature")
	}
	ecc, err := sig.Signature.ECDSA()
	if err != nil {
		return err
	}
	if ecc.Hash != tpm2.TPMAlgSHA256 {
		return errors.New("not a SHA-256 signature")
	}
	digest := sha256.Sum256(data)
	r, s := new(big.Int).SetBytes(ecc.SignatureR.Buffer), new(big.Int).SetBytes(ecc.SignatureS.Buffer)
	if !ecdsa.Verify(key, digest[:], r, s) {
		return errors.New("signature does not verify")
	}
	return nil
}

// makeCredential encrypts a fresh secret to the EK, bound to the AK's Name (TPM2 credential
// protection computed in software): only TPM2_ActivateCredential in the TPM holding both keys
// recovers it.
func makeCredential(v *verified) (secret, credentialBlob, encryptedSecret []byte, err error) {
	ek, err := tpm2.ImportEncapsulationKey(v.ek)
	if err != nil {
		return nil, nil, nil, err
	}
	secret = make([]byte, secretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, nil, nil, err
	}
	credentialBlob, encryptedSecret, err = tpm2.CreateCredential(rand.Reader, ek, v.akName, secret)
	return secret, credentialBlob, encryptedSecret, err
}
