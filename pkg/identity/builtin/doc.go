// Package builtin is HyperFleet's embedded attestation: the bootstrap service itself redeems a
// single-use, TTL-bound join token and signs the VM's X509-SVID with a CA whose key pair lives in a
// Secret. All state is in the API server, updated with optimistic concurrency, so any number of
// bootstrap-service replicas redeem each token at most once.
package builtin
