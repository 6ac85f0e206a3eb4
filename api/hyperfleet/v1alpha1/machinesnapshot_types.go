package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineSnapshotFinalizer keeps a MachineSnapshot until its hypervisor snapshot is removed (or
// retained, as its deletionPolicy says).
const MachineSnapshotFinalizer = "machinesnapshot.hyperfleet.io"

// MachineSnapshotScheduleLabel names the schedule that took a MachineSnapshot.
const MachineSnapshotScheduleLabel = "hyperfleet.io/snapshot-schedule"

// SnapshotDeletionPolicy says what happens to the hypervisor snapshot when its MachineSnapshot
// is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type SnapshotDeletionPolicy string

const (
	// SnapshotDeletionPolicyDelete removes the hypervisor snapshot with the object.
	SnapshotDeletionPolicyDelete SnapshotDeletionPolicy = "Delete"
	// SnapshotDeletionPolicyRetain keeps the hypervisor snapshot; it is then the hypervisor
	// administrator's to remove (deleting the VM removes it too).
	SnapshotDeletionPolicyRetain SnapshotDeletionPolicy = "Retain"
)

// MachineSnapshotPhase is where a snapshot is, with KubeVirt's names.
// +kubebuilder:validation:Enum=InProgress;Succeeded;Failed;Deleting
type MachineSnapshotPhase string

const (
	MachineSnapshotPhaseInProgress MachineSnapshotPhase = "InProgress"
	MachineSnapshotPhaseSucceeded  MachineSnapshotPhase = "Succeeded"
	MachineSnapshotPhaseFailed     MachineSnapshotPhase = "Failed"
	MachineSnapshotPhaseDeleting   MachineSnapshotPhase = "Deleting"
)

// MachineSnapshotSource names the MachineClaim whose VM is snapshotted.
type MachineSnapshotSource struct {
	// machineClaimName in this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineClaimName string `json:"machineClaimName"`
}

// MachineSnapshotSpec is a request for one snapshot of a MachineClaim's VM. It cannot change.
// +kubebuilder:validation:XValidation:rule="self.source == oldSelf.source && (has(self.withMemory) ? self.withMemory : false) == (has(oldSelf.withMemory) ? oldSelf.withMemory : false)",message="a snapshot's source and withMemory cannot change: create another MachineSnapshot"
// +kubebuilder:validation:XValidation:rule="!has(self.failureDeadline) || duration(self.failureDeadline) > duration('0s')",message="failureDeadline must be more than 0s"
type MachineSnapshotSpec struct {
	// source is the claim whose VM is snapshotted.
	Source MachineSnapshotSource `json:"source"`

	// withMemory also saves a running VM's memory, so a restore resumes it where it was. It is
	// ignored for a stopped VM.
	// +optional
	WithMemory bool `json:"withMemory,omitempty"`

	// deletionPolicy: Delete (default) removes the hypervisor snapshot with this object, Retain
	// keeps it.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy SnapshotDeletionPolicy `json:"deletionPolicy,omitempty"`

	// failureDeadline fails a snapshot whose hypervisor task has not ended this long after it
	// started (a hung storage), as KubeVirt's does. Default 5m.
	// +optional
	// +kubebuilder:default="5m"
	FailureDeadline *metav1.Duration `json:"failureDeadline,omitempty"`

	// description is stored with the hypervisor snapshot.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
}

// SnapshotTask is a hypervisor task a snapshot object waits for.
type SnapshotTask struct {
	// id is the hypervisor's task handle (a Proxmox UPID).
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// node runs the task.
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// operation: Snapshot, DeleteSnapshot, Stop or Rollback.
	// +kubebuilder:validation:MaxLength=32
	Operation string `json:"operation"`
	// startTime of the task.
	StartTime metav1.Time `json:"startTime"`
}

// The operations a SnapshotTask records.
const (
	SnapshotOperationSnapshot       = "Snapshot"
	SnapshotOperationDeleteSnapshot = "DeleteSnapshot"
	SnapshotOperationStop           = "Stop"
	SnapshotOperationRollback       = "Rollback"
)

// MachineSnapshotStatus is what HyperFleet observed.
type MachineSnapshotStatus struct {
	// phase: InProgress, Succeeded, Failed or Deleting.
	// +optional
	Phase MachineSnapshotPhase `json:"phase,omitempty"`

	// readyToUse is true once the snapshot exists on the hypervisor and can be restored.
	// +optional
	ReadyToUse bool `json:"readyToUse,omitempty"`

	// snapshotName is the snapshot's name on the hypervisor, chosen from this object's UID
	// before it is taken so a restarted controller finds it again.
	// +optional
	// +kubebuilder:validation:MaxLength=40
	SnapshotName string `json:"snapshotName,omitempty"`

	// sourceVMID and sourceNode are the VM the snapshot belongs to. The ID is the hypervisor's own,
	// opaque to HyperFleet (a Proxmox VMID in decimal).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SourceVMID string `json:"sourceVMID,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SourceNode string `json:"sourceNode,omitempty"`

	// withMemory is true when the snapshot holds the VM's memory.
	// +optional
	WithMemory bool `json:"withMemory,omitempty"`

	// task is the hypervisor task in flight.
	// +optional
	Task *SnapshotTask `json:"task,omitempty"`

	// creationTime is when the hypervisor snapshot was taken.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`

	// error is the last failure, in the hypervisor's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`

	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machinesnapshots,scope=Namespaced,categories=hyperfleet,shortName=msnap
// +kubebuilder:printcolumn:name="Claim",type="string",JSONPath=".spec.source.machineClaimName"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type="boolean",JSONPath=".status.readyToUse"
// +kubebuilder:printcolumn:name="Snapshot",type="string",JSONPath=".status.snapshotName"
// +kubebuilder:printcolumn:name="Taken",type="date",JSONPath=".status.creationTime"
// +kubebuilder:printcolumn:name="Error",type="string",JSONPath=".status.error",priority=1

// MachineSnapshot is one snapshot of a MachineClaim's VM on its hypervisor.
type MachineSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineSnapshotSpec   `json:"spec,omitempty"`
	Status MachineSnapshotStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (s *MachineSnapshot) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the status conditions.
func (s *MachineSnapshot) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// +kubebuilder:object:root=true

// MachineSnapshotList is a list of MachineSnapshots.
type MachineSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineSnapshot `json:"items"`
}

// MachineSnapshotRestoreSpec asks for a MachineClaim's VM to be returned to a snapshot. It cannot
// change.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a restore cannot change: create another MachineSnapshotRestore"
type MachineSnapshotRestoreSpec struct {
	// target is the MachineClaim whose VM is restored; Proxmox restores a snapshot only onto the
	// VM it was taken of, so it must be the snapshot's source.
	Target MachineSnapshotSource `json:"target"`

	// machineSnapshotName names the MachineSnapshot in this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineSnapshotName string `json:"machineSnapshotName"`
}

// MachineSnapshotRestoreStatus is what HyperFleet observed.
type MachineSnapshotRestoreStatus struct {
	// complete is true once the VM is back at the snapshot.
	// +optional
	Complete bool `json:"complete,omitempty"`

	// restoreTime is when the rollback finished.
	// +optional
	RestoreTime *metav1.Time `json:"restoreTime,omitempty"`

	// wasRunning is whether the VM ran before the restore; it is started again afterwards if so.
	// +optional
	WasRunning *bool `json:"wasRunning,omitempty"`

	// task is the hypervisor task in flight.
	// +optional
	Task *SnapshotTask `json:"task,omitempty"`

	// conditions: Ready (the restore is done), Progressing.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machinesnapshotrestores,scope=Namespaced,categories=hyperfleet,shortName=mrestore
// +kubebuilder:printcolumn:name="Claim",type="string",JSONPath=".spec.target.machineClaimName"
// +kubebuilder:printcolumn:name="Snapshot",type="string",JSONPath=".spec.machineSnapshotName"
// +kubebuilder:printcolumn:name="Complete",type="boolean",JSONPath=".status.complete"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MachineSnapshotRestore returns a MachineClaim's VM to a MachineSnapshot. A running VM is stopped
// first (the claim's run strategy waits meanwhile) and started again afterwards.
type MachineSnapshotRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineSnapshotRestoreSpec   `json:"spec,omitempty"`
	Status MachineSnapshotRestoreStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (r *MachineSnapshotRestore) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the status conditions.
func (r *MachineSnapshotRestore) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// +kubebuilder:object:root=true

// MachineSnapshotRestoreList is a list of MachineSnapshotRestores.
type MachineSnapshotRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineSnapshotRestore `json:"items"`
}

// MachineSnapshotRestoreFinalizer lets an unfinished restore hand its claim back to the run
// strategy when it is deleted.
const MachineSnapshotRestoreFinalizer = "machinesnapshotrestore.hyperfleet.io"

func init() {
	SchemeBuilder.Register(&MachineSnapshot{}, &MachineSnapshotList{}, &MachineSnapshotRestore{}, &MachineSnapshotRestoreList{})
}
