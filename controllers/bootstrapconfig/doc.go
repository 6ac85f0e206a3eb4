// Package bootstrapconfig is the BootstrapConfig controller, HyperFleet's Cluster API bootstrap
// provider: for each runner Machine it mints the join token (builtin, TPM-bound, or a SPIRE join
// token), renders the bootstrap data Secret (pkg/bootstrap), holds warm VMs' data until they are
// asked to start, refreshes data that expires before the VM boots, and cleans up its identity
// records when the Machine goes.
package bootstrapconfig
