// Package vmnetwork reconciles VMNetworks: it defines each network on the HypervisorClusters it
// names (through the provider's optional hypervisor.Networker), reports per cluster what became of
// it, refuses to remove a network VMs still use, and is the IPAM provider that answers the
// IPAddressClaims MachineClaims make for NICs on a network.
package vmnetwork
