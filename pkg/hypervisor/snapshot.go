package hypervisor

import (
	"context"
	"time"
)

// Snapshot is one snapshot (Proxmox) or checkpoint (Hyper-V) of a VM.
type Snapshot struct {
	Name        string
	Description string
	// Parent is the snapshot this one derives from, empty for the first.
	Parent string
	// Time is when it was taken; zero when the hypervisor does not say.
	Time time.Time
	// WithMemory is true when the snapshot holds the running VM's memory, so a rollback resumes
	// the VM where it was.
	WithMemory bool
}

// SnapshotSpec describes a snapshot to take.
type SnapshotSpec struct {
	// Name must be unique on the VM: letters, digits, '-' and '_', starting with a letter, at
	// most 40 characters (Proxmox's limit).
	Name        string
	Description string
	// WithMemory saves a running VM's memory too; it is ignored for a stopped VM.
	WithMemory bool
}

// Snapshotter takes, lists, removes and rolls back VM snapshots. It is optional: a provider
// without it cannot serve MachineSnapshots. Every call refuses a VM HyperFleet does not own with
// ErrNotOwned; the long ones return a TaskID the caller keeps and polls with TaskStatus.
type Snapshotter interface {
	// Snapshots lists an owned VM's snapshots, oldest first.
	Snapshots(ctx context.Context, ref VMRef) ([]Snapshot, error)
	// CreateSnapshot takes a snapshot. A name already used fails the task (ErrTaskFailed with
	// the hypervisor's text), as does storage that cannot take snapshots.
	CreateSnapshot(ctx context.Context, ref VMRef, spec SnapshotSpec) (TaskID, error)
	// DeleteSnapshot removes a snapshot.
	DeleteSnapshot(ctx context.Context, ref VMRef, name string) (TaskID, error)
	// RollbackSnapshot returns the VM to a snapshot. A running VM is stopped first by the
	// hypervisor; start asks for it to be started afterwards (a snapshot with memory resumes
	// anyway).
	RollbackSnapshot(ctx context.Context, ref VMRef, name string, start bool) (TaskID, error)
}
