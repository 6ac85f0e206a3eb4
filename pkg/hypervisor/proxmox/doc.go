// Package proxmox implements hypervisor.Provider for Proxmox VE on top of go-proxmox. It owns
// everything Proxmox-specific: TLS and credentials, the ownership tags and description block that
// mark HyperFleet's VMs, the NoCloud cloud-init ISO, UPID task handling and the classification of
// Proxmox errors into hypervisor error classes. Networks are SDN zones and VNets with a firewall
// security group (network.go), storages are storage definitions marked by a resource pool
// (storage.go), and replication is PVE storage replication (replication.go). Nothing
// go-proxmox-typed leaves this package.
package proxmox
