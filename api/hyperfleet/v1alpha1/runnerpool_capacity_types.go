package v1alpha1

// CapacityWait is how many of a pool's runners wait for capacity on one HypervisorCluster: their
// MachineClaims found no host with the memory for their VM and wait in the cluster's capacity
// line, to start when a VM of the cluster is removed.
type CapacityWait struct {
	// cluster is the HypervisorCluster's name.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// count is the number of runners waiting there.
	Count int32 `json:"count"`
}

// WaitingForCapacityReason: the pool has its runners, but some wait for a host with room; Ready's
// message says how many and where.
const WaitingForCapacityReason = "WaitingForCapacity"
