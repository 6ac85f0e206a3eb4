package v1alpha1

// Reasons of the Events HyperFleet records on RunnerPools, VMPools, MachineSnapshots and
// MachineSnapshotSchedules, besides the condition reasons that also name Events.
const (
	// RunnerCreatedEventReason: the pool created a runner (Machine, claim and bootstrap config).
	RunnerCreatedEventReason = "RunnerCreated"
	// RunnerNameTakenEventReason: the name chosen for a new runner is taken; another is tried.
	RunnerNameTakenEventReason = "RunnerNameTaken"
	// RunnerRemovedEventReason: the pool removed a runner (scale-down, lifetime, host maintenance).
	RunnerRemovedEventReason = "RunnerRemoved"
	// WarmRunnerStartedEventReason: a warm VM was taken for a job.
	WarmRunnerStartedEventReason = "WarmRunnerStarted"

	// CreatedVMEventReason and DeletedVMEventReason: a VMPool created or deleted one of its claims.
	CreatedVMEventReason = "CreatedVM"
	DeletedVMEventReason = "DeletedVM"
	// AutoscaledEventReason: a VMPool's spec.autoscaling changed its spec.replicas.
	AutoscaledEventReason = "Autoscaled"

	// SnapshottingEventReason: a MachineSnapshot's hypervisor snapshot is being taken.
	SnapshottingEventReason = "Snapshotting"
	// SnapshotRemovedEventReason: a deleted MachineSnapshot's hypervisor snapshot was removed.
	SnapshotRemovedEventReason = "SnapshotRemoved"
	// SnapshotScheduledEventReason: a schedule created a MachineSnapshot.
	SnapshotScheduledEventReason = "SnapshotScheduled"
	// SnapshotPrunedEventReason: a schedule deleted a MachineSnapshot its retention no longer keeps.
	SnapshotPrunedEventReason = "SnapshotPruned"

	// NetworkRealizedEventReason: a VMNetwork was defined on a HypervisorCluster;
	// StorageRealizedEventReason: a VMStorage was defined or adopted on one.
	NetworkRealizedEventReason = "NetworkRealized"
	StorageRealizedEventReason = "StorageRealized"
	// AddressAllocatedEventReason: a VMNetwork gave an IPAddressClaim an address.
	AddressAllocatedEventReason = "AddressAllocated"
)
