package v1alpha1

// HypervisorClusterLimits bound the work HyperFleet gives a hypervisor cluster at once. Proxmox VE
// serialises clones and disk deletions on a storage's lock and fails a task that waits longer than
// its lock timeout ("can't lock file ... got timeout"); its users run one or two clones per storage
// in parallel. HyperFleet keeps to these limits with an in-process queue, fair across pools and
// oldest first within a pool, instead of letting the hypervisor refuse the excess.
type HypervisorClusterLimits struct {
	// clonesPerHost is how many clones may run at once on one host, whatever their storages.
	// Default 4.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 64",message="clonesPerHost must be between 1 and 64"
	ClonesPerHost int32 `json:"clonesPerHost,omitempty"`

	// tasksPerStorage is how many clones and VM destroys may run at once on one storage of a host
	// (a linked clone's and its VM's disks are on the template's storage; a full clone's on its
	// target storage). Default 2: Proxmox takes the storage's lock for every clone and every
	// destroy, so more only queue inside Proxmox and reach its lock timeout.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 32",message="tasksPerStorage must be between 1 and 32"
	TasksPerStorage int32 `json:"tasksPerStorage,omitempty"`

	// deletesPerHost is how many VMs may be stopped and destroyed at once on one host. Default 4.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 64",message="deletesPerHost must be between 1 and 64"
	DeletesPerHost int32 `json:"deletesPerHost,omitempty"`
}

// MachineClaim VMProvisioned reasons of the capacity queue. None of them is a failure: the claim
// waits its turn without backoff and is woken when it comes.
const (
	// WaitingForSlotReason: the clone or delete waits for a slot of spec.limits.
	WaitingForSlotReason = "WaitingForSlot"
	// HypervisorThrottledReason: the hypervisor timed out on a lock or refused calls; every claim
	// of the cluster waits out one shared backoff.
	HypervisorThrottledReason = "HypervisorThrottled"
)
