// Package v1alpha1 contains HyperFleet's Cluster API infrastructure kinds: HypervisorCluster (the
// InfraCluster, one hypervisor cluster such as Proxmox VE) and MachineClaim (the InfraMachine, one VM
// linked-cloned from a template), with their templates.
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
