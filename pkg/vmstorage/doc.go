// Package vmstorage holds the decisions about VMStorages that need no API server or hypervisor:
// how a VMStorage reads as a hypervisor.StoragePool, who may place VMs on it and through which
// HypervisorCluster, and on which storage and node a VM's disks fit.
package vmstorage
