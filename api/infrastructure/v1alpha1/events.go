package v1alpha1

// Reasons of the Events HyperFleet records on MachineClaims and HypervisorClusters, besides the
// condition reasons that also name Events (VMStoppedReason, HookFailedReason, ...). A finished
// hypervisor task of a claim is recorded as "<Operation>Succeeded": CloneSucceeded,
// ConfigureSucceeded, StartSucceeded, StopSucceeded, DeleteSucceeded, PowerOnSucceeded,
// PowerOffSucceeded.
const (
	// CloningEventReason: the claim's VM is being cloned from its template.
	CloningEventReason = "Cloning"
	// ProvisionedEventReason: the claim's VM is running (or, kept off by its run strategy, made).
	ProvisionedEventReason = "Provisioned"
	// VMRecoveredEventReason: a VM the claim had lost track of was found again and adopted.
	VMRecoveredEventReason = "VMRecovered"
	// WarmStartingEventReason: a warm VM was handed a runner and is being started.
	WarmStartingEventReason = "WarmStarting"
	// CloudInitEjectedEventReason: the VM's spent cloud-init seed was removed.
	CloudInitEjectedEventReason = "CloudInitEjected"
	// HookSucceededEventReason: a preStart or preStop hook finished in the guest.
	HookSucceededEventReason = "HookSucceeded"
	// IPAddressClaimedEventReason: the claim asked an IPAM pool for a NIC's address.
	IPAddressClaimedEventReason = "IPAddressClaimed"
	// DeletingEventReason: the claim is deleted and its VM is being stopped and destroyed.
	DeletingEventReason = "Deleting"
	// ReleasedEventReason: the claim's VM is gone and the claim releases its resources.
	ReleasedEventReason = "Released"
	// HypervisorClusterNotFoundEventReason: a deleted claim's HypervisorCluster is gone, so its VM
	// cannot be reached.
	HypervisorClusterNotFoundEventReason = "HypervisorClusterNotFound"
	// OrphanRemovedEventReason: the sweep destroyed a VM of this installation that no claim owns.
	OrphanRemovedEventReason = "OrphanRemoved"
)
