package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// NV indexes where a TPM's manufacturer stores EK certificates (TCG EK Credential Profile, low
// range): of the ECC P-256 EK and of the RSA 2048 EK.
const (
	ECCEKCertificateIndex tpm2.TPMHandle = 0x01c0000a
	RSAEKCertificateIndex tpm2.TPMHandle = 0x01c00002
)

// chooseEK picks the EK the agent attests with: the ECC P-256 EK if the TPM has its certificate,
// else the RSA 2048 EK if it has that one's (swtpm_setup --create-ek-cert makes only RSA 2048 and
// ECC P-384 certificates), else the ECC P-256 EK without a certificate.
func chooseEK(t transport.TPM) (tpm2.TPMTPublic, []byte, error) {
	for _, ek := range []struct {
		index    tpm2.TPMHandle
		template tpm2.TPMTPublic
	}{{ECCEKCertificateIndex, tpm2.ECCEKTemplate}, {RSAEKCertificateIndex, tpm2.RSAEKTemplate}} {
		cert, err := readEKCertificate(t, ek.index)
		if err != nil {
			return tpm2.TPMTPublic{}, nil, err
		}
		if cert != nil {
			return ek.template, cert, nil
		}
	}
	return tpm2.ECCEKTemplate, nil, nil
}

// maxEKCertificateSize bounds what we read: EK certificates are a few hundred bytes.
const maxEKCertificateSize = 4096

// nvChunk stays below every TPM's TPM_PT_NV_BUFFER_MAX.
const nvChunk = 512

// readEKCertificate returns the DER EK certificate at index, or nil when the TPM has none (many
// virtual TPMs do not).
func readEKCertificate(t transport.TPM, index tpm2.TPMHandle) ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: index}.Execute(t)
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
			NVIndex:    tpm2.NamedHandle{Handle: index, Name: pub.NVName},
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
