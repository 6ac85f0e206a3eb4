// Package v1alpha1 contains FleetControlPlane, the minimal Cluster API control plane of a runner
// fleet. Runner Machines never become Nodes; this kind tells Cluster API the (non-existent)
// workload control plane is initialized and points it at a read-only view of the management
// cluster, so Cluster conditions settle and MachineHealthCheck works for runners.
// +kubebuilder:object:generate=true
// +groupName=controlplane.cluster.x-k8s.io
package v1alpha1
