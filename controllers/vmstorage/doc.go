// Package vmstorage reconciles VMStorages: it defines or adopts each storage on the
// HypervisorClusters it names (through the provider's optional hypervisor.Storager), reports its
// capacity per node for placement, counts the VMs placed on it, gives its Persistent VMs the
// storage's snapshot schedule and replication, and refuses to remove a storage VMs still use.
package vmstorage
