package v1alpha1

// VMNetwork and VMStorage conditions and reasons. Ready sums up the realisations; each
// realisation in status carries its own reason with the same words.
const (
	// InUseCondition is True while a VMNetwork or VMStorage being deleted still has VMs on it;
	// the message names them.
	InUseCondition = "InUse"
	// ReplicatedCondition is True while every Persistent VM on a VMStorage with replication has
	// a replication job whose last run succeeded.
	ReplicatedCondition = "Replicated"

	// RealizedReason (Ready True): every HypervisorCluster holds the network or storage.
	RealizedReason = "Realized"
	// PartiallyRealizedReason (Ready False): some HypervisorClusters hold it, the others' status
	// entries say why not.
	PartiallyRealizedReason = "PartiallyRealized"
	// UnsupportedReason: a field has no equivalent on the hypervisor; the message names it and
	// what the hypervisor lacks. Nothing is defined there.
	UnsupportedReason = "Unsupported"
	// NotOwnedReason: an object of the same name exists on the hypervisor and HyperFleet did not
	// make it; it is left as it is.
	NotOwnedReason = "NotOwned"
	// HypervisorClusterNotFoundReason: spec.clusters names a HypervisorCluster that does not
	// exist in the namespace.
	HypervisorClusterNotFoundReason = "HypervisorClusterNotFound"
	// HypervisorUnavailableReason: the HypervisorCluster's hypervisor did not answer or refused
	// the call; it is retried.
	HypervisorUnavailableReason = "HypervisorUnavailable"
	// InvalidSubnetReason: a DHCP range that CEL cannot check is wrong (its start after its end,
	// the gateway inside it).
	InvalidSubnetReason = "InvalidSubnet"
	// StorageNotFoundReason: an adopted storage does not exist on the hypervisor.
	StorageNotFoundReason = "StorageNotFound"
	// VMsAttachedReason (InUse True): the listed VMs still use the network or storage.
	VMsAttachedReason = "VMsAttached"
	// ReplicationFailedReason (Replicated False): a VM's last replication failed, or its job
	// could not be made.
	ReplicationFailedReason = "ReplicationFailed"
	// ReplicatedReason (Replicated True).
	ReplicatedReason = "Replicated"
)
