// Package bootstrap renders a runner VM's bootstrap data: cloud-init that installs HyperFleet's
// agent and hands it the bootstrap service's address, the trust bundle and a single-use join token.
// Subpackages hold the bootstrap service (the only endpoint VMs talk to) and its wire protocol.
package bootstrap
