package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineSnapshotScheduledTimeAnnotation is set on a MachineSnapshot a schedule took, to the time
// it was due (RFC 3339). Retention counts days, weeks and months by it.
const MachineSnapshotScheduledTimeAnnotation = "hyperfleet.io/scheduled-time"

// SnapshotRetention is how many of its snapshots a schedule keeps. A snapshot is kept when any
// rule keeps it; with no rule every snapshot is kept.
type SnapshotRetention struct {
	// count keeps the newest count snapshots.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count *int32 `json:"count,omitempty"`
	// daily keeps the newest snapshot of each of the newest daily days that have one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Daily *int32 `json:"daily,omitempty"`
	// weekly keeps the newest snapshot of each of the newest weekly ISO weeks that have one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=520
	Weekly *int32 `json:"weekly,omitempty"`
	// monthly keeps the newest snapshot of each of the newest monthly months that have one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=240
	Monthly *int32 `json:"monthly,omitempty"`
}

// MachineSnapshotScheduleSpec takes MachineSnapshots of a claim on a cron schedule.
type MachineSnapshotScheduleSpec struct {
	// source is the claim whose VM is snapshotted.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a schedule's source cannot change: create another schedule"
	Source MachineSnapshotSource `json:"source"`

	// schedule is a five-field cron expression (minute hour day-of-month month day-of-week) or a
	// descriptor such as @daily, read in timeZone: "0 2 * * *" is every night at 02:00.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('TZ=') && !self.startsWith('CRON_TZ=')",message="set the time zone in timeZone, not in the schedule"
	Schedule string `json:"schedule"`

	// timeZone is an IANA time zone name such as Europe/Berlin. Default UTC.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`

	// paused stops new snapshots; retention still removes old ones.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// withMemory also saves the running VM's memory in each snapshot.
	// +optional
	WithMemory bool `json:"withMemory,omitempty"`

	// retention decides which of the schedule's snapshots are kept; unset keeps all.
	// +optional
	Retention *SnapshotRetention `json:"retention,omitempty"`

	// deletionPolicy of the snapshots taken: Delete (default) or Retain.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy SnapshotDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// MachineSnapshotScheduleStatus is what HyperFleet observed.
type MachineSnapshotScheduleStatus struct {
	// lastRunTime is when the last snapshot was due.
	// +optional
	LastRunTime *metav1.Time `json:"lastRunTime,omitempty"`

	// nextRunTime is when the next snapshot is due; unset while paused.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// lastSnapshotName is the MachineSnapshot taken last.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LastSnapshotName string `json:"lastSnapshotName,omitempty"`

	// snapshots counts the schedule's MachineSnapshots after retention.
	// +optional
	Snapshots int32 `json:"snapshots,omitempty"`

	// conditions: Ready (Active, Paused or InvalidSchedule).
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
// +kubebuilder:resource:path=machinesnapshotschedules,scope=Namespaced,categories=hyperfleet,shortName=msched
// +kubebuilder:printcolumn:name="Claim",type="string",JSONPath=".spec.source.machineClaimName"
// +kubebuilder:printcolumn:name="Schedule",type="string",JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="TimeZone",type="string",JSONPath=".spec.timeZone"
// +kubebuilder:printcolumn:name="Paused",type="boolean",JSONPath=".spec.paused"
// +kubebuilder:printcolumn:name="Last",type="date",JSONPath=".status.lastRunTime"
// +kubebuilder:printcolumn:name="Next",type="string",JSONPath=".status.nextRunTime"
// +kubebuilder:printcolumn:name="Snapshots",type="integer",JSONPath=".status.snapshots"

// MachineSnapshotSchedule takes MachineSnapshots of a claim's VM on a schedule and prunes them by
// its retention policy.
type MachineSnapshotSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineSnapshotScheduleSpec   `json:"spec,omitempty"`
	Status MachineSnapshotScheduleStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (s *MachineSnapshotSchedule) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions replaces the status conditions.
func (s *MachineSnapshotSchedule) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// +kubebuilder:object:root=true

// MachineSnapshotScheduleList is a list of MachineSnapshotSchedules.
type MachineSnapshotScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineSnapshotSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineSnapshotSchedule{}, &MachineSnapshotScheduleList{})
}
