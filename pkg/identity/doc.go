// Package identity gives runner VMs SPIFFE identities: the IDs HyperFleet assigns, a small X.509 CA
// that signs SVIDs from certificate signing requests (the VM keeps its key), the single-use join
// token format, and the interfaces an attestation method (builtin, TPM-bound builtin, SPIRE) plugs
// into. It has no Kubernetes dependency so the in-VM agent can use it too.
package identity
