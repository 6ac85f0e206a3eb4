// Package tpm is the bootstrap-service side of HyperFleet's TPM attestation (method TPM, builtin
// CA). On top of the single-use join token, the VM proves with TPM2 credential activation that its
// attestation key lives in the TPM of the endorsement key it names, and that the key its X509-SVID
// is issued to was certified by that attestation key: the SVID key cannot leave that TPM. The
// challenge's state travels with the VM, sealed with a key derived from the CA key, so any replica
// (or a restarted service) can finish what another started and nothing is left behind.
package tpm
