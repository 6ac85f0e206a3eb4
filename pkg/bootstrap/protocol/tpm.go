package protocol

import (
	"crypto/sha256"
	"time"
)

// Endpoints of TPM attestation (method TPM): two steps over TLS without a client certificate.
const (
	// TPMAttestPath: POST TPMAttestRequest → TPMChallenge. Redeems the join token.
	TPMAttestPath = "/v1/attest/tpm"
	// TPMActivatePath: POST TPMActivateRequest → AttestResponse.
	TPMActivatePath = "/v1/attest/tpm/activate"
)

// TPMAttestRequest is the join token plus TPM evidence. Byte fields are TPM 2.0 structures as the
// TPM returns them (base64 in JSON).
type TPMAttestRequest struct {
	JoinToken string `json:"joinToken"`
	// CSR is a PEM certificate signing request signed by the TPM-resident SVID key.
	CSR string `json:"csr"`
	// EKPublic, AKPublic and KeyPublic are TPMT_PUBLIC structures of the endorsement key, the
	// attestation key and the SVID key.
	EKPublic  []byte `json:"ekPublic"`
	AKPublic  []byte `json:"akPublic"`
	KeyPublic []byte `json:"keyPublic"`
	// CertifyInfo (TPMS_ATTEST) and CertifySignature (TPMT_SIGNATURE) are TPM2_Certify of the SVID
	// key by the AK, qualified with the SHA-256 of the join token.
	CertifyInfo      []byte `json:"certifyInfo"`
	CertifySignature []byte `json:"certifySignature"`
	// EKCertificate is the DER certificate of the EK from the TPM's NV storage, when it has one.
	EKCertificate []byte `json:"ekCertificate,omitempty"`
}

// TPMChallenge is a credential the VM's TPM decrypts with TPM2_ActivateCredential.
type TPMChallenge struct {
	ChallengeID     string    `json:"challengeID"`
	CredentialBlob  []byte    `json:"credentialBlob"`
	EncryptedSecret []byte    `json:"encryptedSecret"`
	ExpiresAt       time.Time `json:"expiresAt"`
	// State is the challenge's state, sealed by the service for itself: opaque to the VM, which
	// sends it back unchanged in TPMActivateRequest. The service keeps no copy.
	State []byte `json:"state"`
}

// TPMActivateRequest answers a TPMChallenge with the decrypted secret.
type TPMActivateRequest struct {
	ChallengeID string `json:"challengeID"`
	Secret      []byte `json:"secret"`
	// State is TPMChallenge.State, unchanged.
	State []byte `json:"state"`
}

// TPMEvidence is what the VM sends to start a TPM attestation. Public areas are marshalled
// TPMT_PUBLIC structures; the service recomputes every Name from them itself.
type TPMEvidence struct {
	// CSR is a PEM certificate signing request signed by the TPM-resident key.
	CSR []byte
	// EKPublic is the endorsement key the credential challenge is encrypted to.
	EKPublic []byte
	// AKPublic is the restricted signing key the challenge names.
	AKPublic []byte
	// KeyPublic is the key the SVID is issued to.
	KeyPublic []byte
	// CertifyInfo (TPMS_ATTEST) and CertifySignature (TPMT_SIGNATURE) are TPM2_Certify of the key
	// by the AK, qualified with CertifyQualifier(joinToken).
	CertifyInfo      []byte
	CertifySignature []byte
	// EKCertificate is the DER certificate of the EK its manufacturer stored in the TPM, if any.
	EKCertificate []byte
}

// CertifyQualifier is the qualifying data of the key's certification: the SHA-256 of the single-use
// join token, so a certification cannot be replayed into another attestation.
func CertifyQualifier(joinToken string) []byte {
	sum := sha256.Sum256([]byte(joinToken))
	return sum[:]
}
