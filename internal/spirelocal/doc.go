// Package spirelocal runs a SPIRE server and agents as local processes (binaries built by
// hack/spire.sh): the server on loopback with its admin API on a Unix socket, agents configured
// exactly as a VM's bootstrap data configures them, and the registration calls an operator makes.
// The local fleet's SPIRE mode (internal/devfleet, linked into hyperfleet-dev) and HyperFleet's
// SPIRE tests use it; it sits under internal/ rather than test/ because that dev binary links it.
package spirelocal
