// Package v1alpha1 contains HyperFleet's Cluster API bootstrap kinds: BootstrapConfig renders the
// cloud-init that installs the in-VM agent with a single-use join token, and BootstrapConfigTemplate
// stamps them out for RunnerPools and MachineSets. No long-lived credential is ever part of them.
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package v1alpha1
