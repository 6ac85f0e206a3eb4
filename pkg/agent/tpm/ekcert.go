package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// ECCEKCertificateIndex is the NV index where a TPM's manufacturer stores the certificate of the
// TCG ECC P-256 EK (TCG EK Credential Profile, low range), the EK the agent uses.
const ECCEKCertificateIndex tpm2.TPMHandle = 0x01c0000a

// maxEKCertificateSize bounds what we read: EK certificates are a few hundred bytes.
const maxEKCertificateSize = 4096

// nvChunk stays below every TPM's TPM_PT_NV_BUFFER_MAX.
const nvChunk = 512

// ReadEKCertificate returns the DER EK certificate at ECCEKCertificateIndex, or nil when the TPM
// has none (many virtual TPMs do not).
func ReadEKCertificate(t transport.TPM) ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: ECCEKCertificateIndex}.Execute(t)
	if err != nil {
		return nil, nil //nolint:nilerr // no such index: the TPM has no EK certificate
	}
	contents, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, err
	}
	size := int(contents.DataSize)
	if size == 0 || size > maxEKCertificateSize {
		return nil, fmt.Errorf("EK certificate NV index holds %d bytes", size)
	}
	out := make([]byte, 0, size)
	for len(out) < size {
		n := min(nvChunk, size-len(out))
		rsp, err := tpm2.NVRead{
			AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: ECCEKCertificateIndex, Name: pub.NVName},
			Size:       uint16(n),
			Offset:     uint16(len(out)),
		}.Execute(t)
		if err != nil {
			return nil, fmt.Errorf("reading the EK certificate: %w", err)
		}
		out = append(out, rsp.Data.Buffer...)
	}
	return trimDER(out), nil
}

// trimDER drops the padding some manufacturers leave after the certificate in its NV area.
func trimDER(b []byte) []byte {
	if len(b) < 4 || b[0] != 0x30 || b[1] != 0x82 {
		return b
	}
	if n := 4 + (int(b[2])<<8 | int(b[3])); n <= len(b) {
		return b[:n]
	}
	return b
}
