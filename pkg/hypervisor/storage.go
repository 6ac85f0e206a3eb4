package hypervisor

import (
	"context"
	"time"
)

// StoragePool is a storage HyperFleet defines, or adopts, on a hypervisor cluster for one
// VMStorage.
type StoragePool struct {
	// Name is the storage's name on the hypervisor (a Proxmox storage ID, a Hyper-V folder's
	// last element).
	Name string
	// Owner marks a storage HyperFleet creates; an adopted storage is never marked or changed.
	Owner Ownership
	// Adopt uses an existing storage as it is: HyperFleet reads its state and places VMs on it,
	// and never changes or deletes it.
	Adopt bool
	// Type is the backend: Proxmox's storage types ("dir", "zfspool", "lvmthin", "nfs"), or
	// "directory" on Hyper-V.
	Type string
	// Path is a directory storage's path (or a Hyper-V folder); Pool a ZFS pool or LVM thin pool;
	// Server and Export an NFS share.
	Path   string
	Pool   string
	Server string
	Export string
	// Nodes the storage is on; empty for all.
	Nodes []string
	// Content is what the storage holds ("images", "iso", "snippets").
	Content []string
	// Encrypted asks the backend to encrypt the data at rest.
	Encrypted bool
}

// StorageGap is a feature of a StoragePool that a provider or backend cannot give.
type StorageGap struct {
	Field  string
	Reason string
}

// StorageState is a storage's state on each node.
type StorageState struct {
	Nodes []StorageNodeState
	// Shared storage is one pool seen from every node (NFS, Ceph): its bytes count once.
	Shared bool
}

// StorageNodeState is a storage's state on one node.
type StorageNodeState struct {
	Node string
	// Active is false when the node cannot reach the storage.
	Active                bool
	TotalBytes, UsedBytes int64
	AvailableBytes        int64
}

// Storager is a provider that can define storages on the hypervisor cluster (Proxmox storage
// definitions, Hyper-V folders) and report their capacity. It is optional: a provider without it
// refuses VMStorages with a reason.
type Storager interface {
	// StorageGaps lists the features of p the provider cannot give, without a call.
	StorageGaps(p StoragePool) []StorageGap
	// EnsureStorage creates the storage, or for Adopt checks it exists; an existing storage of
	// that name without p.Owner's mark is adopted only when p.Adopt is set, and never changed.
	EnsureStorage(ctx context.Context, p StoragePool) error
	// DeleteStorage removes the definition of a storage EnsureStorage created (never its data:
	// a Proxmox storage definition goes, the disks on it stay); ErrNotOwned otherwise; nothing
	// left is not an error.
	DeleteStorage(ctx context.Context, name string, owner Ownership) error
	// StorageState reads the storage's capacity on each node; ErrNotFound when it is not defined.
	StorageState(ctx context.Context, name string) (StorageState, error)
}

// ReplicationJob replicates an owned VM's disks to another node on a schedule (Proxmox storage
// replication of ZFS volumes).
type ReplicationJob struct {
	VM VMRef
	// Target is the node the disks are copied to.
	Target string
	// Schedule is the hypervisor's calendar event ("*/15").
	Schedule string
	// RateMBps limits the copy's bandwidth in megabytes per second; 0 for none.
	RateMBps int
}

// ReplicationState is the last run of a replication job.
type ReplicationState struct {
	LastSync time.Time
	// Error is the last run's failure, empty when it succeeded.
	Error string
}

// Replicator is a provider that replicates VM disks between nodes. It is optional.
type Replicator interface {
	// EnsureReplication creates the job for an owned VM, or updates its schedule and rate.
	EnsureReplication(ctx context.Context, job ReplicationJob) error
	// ReplicationState reads the job's last run; ErrNotFound when the VM has no job.
	ReplicationState(ctx context.Context, vm VMRef) (ReplicationState, error)
}
