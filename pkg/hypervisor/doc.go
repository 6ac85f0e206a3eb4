// Package hypervisor defines the narrow, provider-neutral interface HyperFleet's controllers use to
// manage VMs: domain types (VM, power state, task handles, nodes) and classified errors instead of any
// hypervisor's wire format. Proxmox VE is the first implementation (package hypervisor/proxmox);
// Hyper-V and VMware plug in behind the same interface.
package hypervisor
