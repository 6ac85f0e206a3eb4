package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineMigrationFinalizer lets a MachineMigration deleted mid-way stop its hypervisor task and
// hand its claim back before it goes.
const MachineMigrationFinalizer = "machinemigration.hyperfleet.io"

// MigrationTargetAny lets HyperFleet choose the target host.
const MigrationTargetAny = "any"

// MachineMigrationPhase is where a migration is, with KubeVirt's names.
// +kubebuilder:validation:Enum=Pending;Scheduling;Running;Succeeded;Failed
type MachineMigrationPhase string

const (
	// MachineMigrationPhasePending: waiting for the claim (no VM yet, another migration or a
	// restore holds it, its hypervisor is not available).
	MachineMigrationPhasePending MachineMigrationPhase = "Pending"
	// MachineMigrationPhaseScheduling: choosing and checking the target host.
	MachineMigrationPhaseScheduling MachineMigrationPhase = "Scheduling"
	// MachineMigrationPhaseRunning: the hypervisor's migration task runs.
	MachineMigrationPhaseRunning MachineMigrationPhase = "Running"
	// MachineMigrationPhaseSucceeded: the VM is on the target host.
	MachineMigrationPhaseSucceeded MachineMigrationPhase = "Succeeded"
	// MachineMigrationPhaseFailed: the migration was refused or failed; the VM is where it was.
	MachineMigrationPhaseFailed MachineMigrationPhase = "Failed"
)

// MachineMigrationSpec asks for a persistent MachineClaim's VM to move to another host. It cannot
// change; delete the object to cancel the migration.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a migration cannot change: delete it (which cancels it) and create another"
type MachineMigrationSpec struct {
	// machineClaimName is the persistent claim, in this namespace, whose VM moves.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineClaimName string `json:"machineClaimName"`

	// target is the host to move to, or "any" (the default) to let HyperFleet choose among the
	// hosts the hypervisor allows, the HypervisorCluster's allowedNodes and hosts not in
	// maintenance, the one with the most free memory.
	// +optional
	// +kubebuilder:default=any
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?|any)$`
	Target string `json:"target,omitempty"`

	// online moves a running VM live (the default). With online false a running VM is refused,
	// as the hypervisor refuses it; a stopped VM always moves offline.
	// +optional
	// +kubebuilder:default=true
	Online *bool `json:"online,omitempty"`

	// withLocalDisks copies disks on storage only the source host has. It needs the claim's
	// migrationPolicy.allowLocalDisks.
	// +optional
	WithLocalDisks bool `json:"withLocalDisks,omitempty"`
}

// MigrationTask is the hypervisor task of a migration.
type MigrationTask struct {
	// id is the hypervisor's task handle (a Proxmox UPID).
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// node runs the task (the source host).
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// startTime of the task.
	StartTime metav1.Time `json:"startTime"`
}

// MachineMigrationStatus is what HyperFleet observed.
type MachineMigrationStatus struct {
	// phase: Pending, Scheduling, Running, Succeeded or Failed.
	// +optional
	Phase MachineMigrationPhase `json:"phase,omitempty"`

	// vmID is the VM that moves, the hypervisor's ID as text.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	VMID string `json:"vmID,omitempty"`

	// sourceHost is where the VM was and targetHost where it goes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SourceHost string `json:"sourceHost,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	TargetHost string `json:"targetHost,omitempty"`

	// online is whether the VM moves live (false: a stopped VM moves offline).
	// +optional
	Online bool `json:"online,omitempty"`

	// task is the hypervisor task in flight.
	// +optional
	Task *MigrationTask `json:"task,omitempty"`

	// progress is the share of the move done, in percent, while it runs, as the hypervisor
	// reports it (a Hyper-V migration job's PercentComplete); absent when it does not say.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Progress *int32 `json:"progress,omitempty"`

	// startTime is when the migration task started; endTime when the migration ended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// error is the failure, in the hypervisor's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`

	// conditions: Ready (True once the VM is on the target) and Progressing.
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
// +kubebuilder:resource:path=machinemigrations,scope=Namespaced,categories=hyperfleet,shortName=mmig
// +kubebuilder:printcolumn:name="Claim",type="string",JSONPath=".spec.machineClaimName"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Source",type="string",JSONPath=".status.sourceHost"
// +kubebuilder:printcolumn:name="Target",type="string",JSONPath=".status.targetHost"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Error",type="string",JSONPath=".status.error",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MachineMigration moves a persistent MachineClaim's VM to another host, once. Deleting it while
// the hypervisor task runs cancels the task; the VM then stays where it was.
type MachineMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineMigrationSpec   `json:"spec,omitempty"`
	Status MachineMigrationStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (m *MachineMigration) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions.
func (m *MachineMigration) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// IsOnline is spec.online with its default.
func (s *MachineMigrationSpec) IsOnline() bool { return s.Online == nil || *s.Online }

// +kubebuilder:object:root=true

// MachineMigrationList is a list of MachineMigrations.
type MachineMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineMigration `json:"items"`
}

// MachineMigration reasons (conditions Ready and Progressing).
const (
	// MigrationWaitingReason: the claim is not ready to move (no VM yet, held by a restore or
	// another migration, its hypervisor unavailable).
	MigrationWaitingReason = "WaitingForClaim"
	// MigrationSchedulingReason: the target host is being chosen.
	MigrationSchedulingReason = "Scheduling"
	// MigrationRunningReason: the hypervisor's migration task runs.
	MigrationRunningReason = "Migrating"
	// MigrationSucceededReason: the VM is on the target host.
	MigrationSucceededReason = "Migrated"
	// MigrationFailedReason: the hypervisor refused or failed the migration; see status.error.
	MigrationFailedReason = "MigrationFailed"
	// MigrationForbiddenReason: the claim's migrationPolicy does not allow this migration.
	MigrationForbiddenReason = "MigrationForbidden"
	// NoTargetHostReason: no host can take the VM (none allowed, all in maintenance or full).
	NoTargetHostReason = "NoTargetHost"
	// MigrationCancellingReason: the object was deleted and its task is being stopped.
	MigrationCancellingReason = "Cancelling"
	// MigrationsUnsupportedReason: the claim's hypervisor provider cannot migrate VMs.
	MigrationsUnsupportedReason = "MigrationsUnsupported"
)

func init() {
	SchemeBuilder.Register(&MachineMigration{}, &MachineMigrationList{})
}
