package v1alpha1

// MachineSnapshot, MachineSnapshotRestore and MachineSnapshotSchedule conditions and reasons.
// Ready is ReadyCondition.
const (
	// ProgressingCondition is True while a restore is under way.
	ProgressingCondition = "Progressing"

	// SnapshotTakenReason: the hypervisor snapshot exists.
	SnapshotTakenReason = "SnapshotTaken"
	// SnapshotInProgressReason: the snapshot task runs.
	SnapshotInProgressReason = "InProgress"
	// SnapshotFailedReason: the hypervisor refused or failed the snapshot; see status.error.
	SnapshotFailedReason = "SnapshotFailed"
	// SourceNotFoundReason: the MachineClaim named does not exist.
	SourceNotFoundReason = "SourceNotFound"
	// SourceNotReadyReason: the claim has no VM yet, or its HypervisorCluster is not available.
	SourceNotReadyReason = "SourceNotReady"
	// SourceVMGoneReason: the VM the snapshot belonged to is gone, and with it the snapshot.
	SourceVMGoneReason = "SourceVMGone"
	// SnapshotsUnsupportedReason: the claim's hypervisor provider cannot take snapshots.
	SnapshotsUnsupportedReason = "SnapshotsUnsupported"

	// RestoreWaitingReason: the snapshot is not ready to use yet.
	RestoreWaitingReason = "WaitingForSnapshot"
	// RestoreStoppingReason: the VM is being stopped before the rollback.
	RestoreStoppingReason = "StoppingVM"
	// RestoreRollingBackReason: the rollback task runs.
	RestoreRollingBackReason = "RollingBack"
	// RestoreCompleteReason: the VM is back at the snapshot.
	RestoreCompleteReason = "Restored"
	// RestoreFailedReason: the rollback failed or cannot be done (another claim's snapshot).
	RestoreFailedReason = "RestoreFailed"

	// SchedulePausedReason: spec.paused stops new snapshots; retention still applies.
	SchedulePausedReason = "Paused"
	// ScheduleActiveReason: the schedule takes snapshots.
	ScheduleActiveReason = "Active"
	// ScheduleInvalidReason: the cron expression or time zone does not parse.
	ScheduleInvalidReason = "InvalidSchedule"
)
