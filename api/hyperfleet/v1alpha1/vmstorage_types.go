package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VMStorageFinalizer keeps a VMStorage until its hypervisor definitions are gone.
const VMStorageFinalizer = "vmstorage.hyperfleet.io"

// VMStorageNameLabel is set on the snapshot schedules a VMStorage's defaults made, to
// "<namespace>.<name>" of the storage. A claim placed on a storage names it in status.storage.
const VMStorageNameLabel = "hyperfleet.io/vm-storage"

// VMStorageType is a storage backend.
// +kubebuilder:validation:Enum=dir;zfspool;lvmthin;nfs;directory;datastore
type VMStorageType string

const (
	// Proxmox VE storage types.
	StorageDir     VMStorageType = "dir"
	StorageZFSPool VMStorageType = "zfspool"
	StorageLVMThin VMStorageType = "lvmthin"
	StorageNFS     VMStorageType = "nfs"
	// StorageDirectory is a Hyper-V folder for VHDX files on a host volume.
	StorageDirectory VMStorageType = "directory"
	// StorageDatastore is an existing vSphere datastore (adopt only).
	StorageDatastore VMStorageType = "datastore"
)

// VMStorageSnapshots are the snapshot defaults for the Persistent VMs on the storage: each gets a
// MachineSnapshotSchedule with this schedule and retention unless it has a schedule of its own.
type VMStorageSnapshots struct {
	// schedule is a five-field cron expression or a descriptor such as @daily, in UTC.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`

	// retention of the snapshots taken; unset keeps all.
	// +optional
	Retention *SnapshotRetention `json:"retention,omitempty"`
}

// VMStorageReplication copies the disks of the Persistent VMs on the storage to another node on
// a schedule (Proxmox VE storage replication, which needs ZFS: other backends are refused).
type VMStorageReplication struct {
	// targetNode receives the copies.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	TargetNode string `json:"targetNode"`

	// schedule in Proxmox's calendar-event form, such as */15 (every 15 minutes). Default */15.
	// +optional
	// +kubebuilder:default="*/15"
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9*/,.:\- ]+$`
	Schedule string `json:"schedule,omitempty"`

	// rateMBps limits the copy's bandwidth in megabytes per second.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	RateMBps *int32 `json:"rateMBps,omitempty"`
}

// VMStorageSpec is the desired storage.
// +kubebuilder:validation:XValidation:rule="self.type != 'datastore' || (has(self.adopt) && self.adopt)",message="a vSphere datastore can only be adopted: set adopt: true"
// +kubebuilder:validation:XValidation:rule="!(self.type in ['dir', 'directory']) || (has(self.adopt) && self.adopt) || has(self.path)",message="path is required for a dir or directory storage"
// +kubebuilder:validation:XValidation:rule="!(self.type in ['zfspool', 'lvmthin']) || (has(self.adopt) && self.adopt) || has(self.pool)",message="pool is required for a zfspool or lvmthin storage"
// +kubebuilder:validation:XValidation:rule="self.type != 'nfs' || (has(self.adopt) && self.adopt) || (has(self.server) && has(self.export))",message="server and export are required for an nfs storage"
// +kubebuilder:validation:XValidation:rule="!has(self.replication) || self.type == 'zfspool'",message="replication needs a zfspool storage: Proxmox VE replicates ZFS volumes only"
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type && (has(self.adopt) && self.adopt) == (has(oldSelf.adopt) && oldSelf.adopt) && has(self.storageName) == has(oldSelf.storageName) && (!has(self.storageName) || self.storageName == oldSelf.storageName)",message="type, adopt and storageName cannot change: create a new VMStorage instead"
type VMStorageSpec struct {
	// clusters are the HypervisorClusters of this namespace the storage is defined on.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Clusters []LocalObjectReference `json:"clusters"`

	// storageName is the storage's name on the hypervisor (a Proxmox storage ID, the Hyper-V
	// folder's name, the vSphere datastore); default the VMStorage's name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9\-_.]*[a-z0-9]$`
	StorageName string `json:"storageName,omitempty"`

	// adopt uses an existing storage as it is: HyperFleet reads its capacity and places VMs on
	// it, and never changes or deletes it. Without adopt HyperFleet creates the storage and
	// refuses a same-named one it did not create.
	// +optional
	Adopt bool `json:"adopt,omitempty"`

	// type of backend: dir, zfspool, lvmthin, nfs (Proxmox VE), directory (Hyper-V), datastore
	// (vSphere, adopt only).
	Type VMStorageType `json:"type"`

	// path of a dir storage or Hyper-V directory.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Path string `json:"path,omitempty"`

	// pool is the ZFS pool or LVM thin pool.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Pool string `json:"pool,omitempty"`

	// server and export of an nfs storage.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Server string `json:"server,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Export string `json:"export,omitempty"`

	// nodes the storage is on; unset for all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Nodes []string `json:"nodes,omitempty"`

	// content the storage holds; default images (VM disks).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=images;iso;snippets;backup
	Content []string `json:"content,omitempty"`

	// tier is a performance class (fast, bulk, ...) that claims ask for instead of naming a
	// storage; the VMStorage's label hyperfleet.io/storage-tier is set to it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Tier string `json:"tier,omitempty"`

	// snapshots are the snapshot defaults of the Persistent VMs on the storage.
	// +optional
	Snapshots *VMStorageSnapshots `json:"snapshots,omitempty"`

	// replication of the Persistent VMs' disks to another node.
	// +optional
	Replication *VMStorageReplication `json:"replication,omitempty"`

	// encrypted asks the backend to encrypt the data at rest. No backend HyperFleet defines
	// offers it through its API, so it is refused with the reason on every hypervisor: adopt a
	// storage that is encrypted below (a ZFS dataset with encryption, a BitLocker volume).
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`

	// allowedNamespaces may place VMs on this storage, besides its own namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// VMStorageNode is the storage's capacity on one node.
type VMStorageNode struct {
	Node string `json:"node"`
	// active is false when the node cannot reach the storage.
	Active bool `json:"active"`
	// +optional
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// +optional
	UsedBytes int64 `json:"usedBytes,omitempty"`
	// +optional
	AvailableBytes int64 `json:"availableBytes,omitempty"`
}

// VMStorageRealization is the storage on one HypervisorCluster.
type VMStorageRealization struct {
	// cluster is the HypervisorCluster's name.
	Cluster string `json:"cluster"`
	// ready is true once the storage is defined (or found, when adopted) and readable.
	Ready bool `json:"ready"`
	// endpoint of the HypervisorCluster's hypervisor.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// shared storage is one pool seen from every node.
	// +optional
	Shared bool `json:"shared,omitempty"`
	// nodes with their capacity.
	// +optional
	// +listType=map
	// +listMapKey=node
	Nodes []VMStorageNode `json:"nodes,omitempty"`
	// observedTime is when the capacity was read.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
	// reason is why the storage is not ready, in one CamelCase word.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message says it for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// VMStoragePhase sums up a VMStorage.
// +kubebuilder:validation:Enum=Pending;Ready;Degraded;Deleting
type VMStoragePhase string

const (
	VMStoragePending  VMStoragePhase = "Pending"
	VMStorageReady    VMStoragePhase = "Ready"
	VMStorageDegraded VMStoragePhase = "Degraded"
	VMStorageDeleting VMStoragePhase = "Deleting"
)

// VMStorageStatus is the observed storage.
type VMStorageStatus struct {
	// conditions: Ready, Replicated (when replication is set).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	Phase VMStoragePhase `json:"phase,omitempty"`

	// realizations per HypervisorCluster.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Realizations []VMStorageRealization `json:"realizations,omitempty"`

	// usedBytes and availableBytes summed over the realisations (a shared storage once).
	// +optional
	UsedBytes int64 `json:"usedBytes,omitempty"`
	// +optional
	AvailableBytes int64 `json:"availableBytes,omitempty"`

	// allocations counts the MachineClaims placed on the storage; allocatedBytes their disks.
	// +optional
	Allocations int32 `json:"allocations,omitempty"`
	// +optional
	AllocatedBytes int64 `json:"allocatedBytes,omitempty"`

	// lastReplication is the oldest last successful replication among the storage's VMs.
	// +optional
	LastReplication *metav1.Time `json:"lastReplication,omitempty"`
}

// VMStorageTierLabel carries a VMStorage's spec.tier.
const VMStorageTierLabel = "hyperfleet.io/storage-tier"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=vmstorages,scope=Namespaced,categories=hyperfleet,shortName=vmst
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Tier",type="string",JSONPath=".spec.tier"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableBytes"
// +kubebuilder:printcolumn:name="VMs",type="integer",JSONPath=".status.allocations"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// VMStorage is a storage HyperFleet defines or adopts on hypervisor clusters, with a performance
// tier claims ask for, snapshot and replication defaults for the VMs on it, and its capacity,
// which placement honours.
type VMStorage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VMStorageSpec   `json:"spec,omitempty"`
	Status VMStorageStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// VMStorageList is a list of VMStorages.
type VMStorageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMStorage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VMStorage{}, &VMStorageList{})
}

// GetConditions returns the storage's conditions.
func (s *VMStorage) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions sets the storage's conditions.
func (s *VMStorage) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }
