// Package tpm is the VM side of HyperFleet's TPM attestation: it opens the VM's TPM (a device such
// as /dev/tpmrm0, or a software TPM over TCP in tests), creates the endorsement key, an attestation
// key and the non-exportable key the VM's X509-SVID is issued to, and answers the bootstrap
// service's credential challenge. It has no Kubernetes dependency so the agent binary stays small.
package tpm
