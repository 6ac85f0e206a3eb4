// Package vmnetwork holds the decisions about VMNetworks that need no API server or hypervisor:
// the short ID a network's hypervisor objects are named from, who may attach to a network and
// through which HypervisorCluster, how a VMNetwork reads as a hypervisor.VirtualNetwork and a
// NIC's policy, and which address of the IPAM range a new VM gets.
package vmnetwork
