// Package bootstraptest builds, in a test API server, the objects the bootstrap service reads:
// a Cluster, a GitHub-backed RunnerPool with its App credentials, and Machines with their
// MachineClaims and BootstrapConfigs carrying freshly minted join tokens.
package bootstraptest
