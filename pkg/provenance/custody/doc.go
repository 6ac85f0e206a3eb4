// Package custody keeps the installation's provenance signing key in Kubernetes: the private key
// in a Secret of the manager's namespace, which no VM's credentials reach, created once and never
// replaced by HyperFleet, and its public keys, current and previous, in a ConfigMap anyone may
// read to verify job records.
package custody
