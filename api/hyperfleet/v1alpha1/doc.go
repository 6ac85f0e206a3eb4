// Package v1alpha1 contains HyperFleet's own kinds: RunnerPool, a MachineSet-like owner of Cluster API
// Machines for one CI runner label set, scaled by CI job demand; VMPool, a set of persistent VMs from
// one template; and the requests on a persistent VM: MachineSnapshot, MachineSnapshotRestore,
// MachineSnapshotSchedule and MachineMigration.
// +kubebuilder:object:generate=true
// +groupName=hyperfleet.io
package v1alpha1
