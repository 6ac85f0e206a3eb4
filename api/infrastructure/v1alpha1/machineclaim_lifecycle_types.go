package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lifecycle says what a MachineClaim's VM is for.
// +kubebuilder:validation:Enum=Ephemeral;Persistent
type Lifecycle string

const (
	// LifecycleEphemeral: a one-job runner. Once its VM stops, the sweep retires the runner and the
	// VM is destroyed.
	LifecycleEphemeral Lifecycle = "Ephemeral"
	// LifecyclePersistent: a long-lived VM. The sweep never destroys it; spec.runStrategy decides
	// whether a stopped VM is started again. Only deleting the claim destroys the VM.
	LifecyclePersistent Lifecycle = "Persistent"
)

// RunStrategy is what HyperFleet does with a persistent VM's power state, with KubeVirt's meaning.
// +kubebuilder:validation:Enum=Always;RerunOnFailure;Halted;Manual;Once
type RunStrategy string

const (
	// RunStrategyAlways: the VM runs; whenever it stops, however it stopped, it is started again.
	RunStrategyAlways RunStrategy = "Always"
	// RunStrategyRerunOnFailure: the VM runs; it is started again after a failure (stopped from
	// the hypervisor side), but a shutdown from inside the guest is respected.
	RunStrategyRerunOnFailure RunStrategy = "RerunOnFailure"
	// RunStrategyHalted: the VM is kept powered off (it is still created).
	RunStrategyHalted RunStrategy = "Halted"
	// RunStrategyManual: HyperFleet starts the VM once it is created and then only acts on power
	// requests (the PowerRequestAnnotation).
	RunStrategyManual RunStrategy = "Manual"
	// RunStrategyOnce: the VM is started once; when it stops, for whatever reason, it stays off.
	RunStrategyOnce RunStrategy = "Once"
)

// PowerRequestAnnotation asks HyperFleet to start or stop a persistent claim's VM whose
// runStrategy is Manual: the value is Start or Stop. Like KubeVirt's start and stop subresources
// it is a one-off request, not a desired state: HyperFleet acts on it once, records it in
// status.lastPowerRequest and removes the annotation. Under any other run strategy the request is
// refused with a PowerRequestRefused Event and removed; change spec.runStrategy instead.
const PowerRequestAnnotation = "infrastructure.cluster.x-k8s.io/power-request"

// Power requests, the values of PowerRequestAnnotation.
const (
	PowerRequestStart = "Start"
	PowerRequestStop  = "Stop"
)

// RestoreInProgressAnnotation is set on a persistent claim, to the name of a MachineSnapshotRestore,
// while that restore stops the VM and rolls it back: the claim's run strategy waits meanwhile (an
// Always VM is not restarted in the middle of a rollback). The restore removes it when done.
const RestoreInProgressAnnotation = "infrastructure.cluster.x-k8s.io/restore-in-progress"

// MigrationInProgressAnnotation is set on a persistent claim, to the name of a MachineMigration,
// while that migration moves the VM: the claim shows phase Migrating and its run strategy waits
// (the VM is locked by the hypervisor meanwhile). The migration removes it when done.
const MigrationInProgressAnnotation = "infrastructure.cluster.x-k8s.io/migration-in-progress"

// MigrationStrategy says whether a persistent VM may move between hosts.
// +kubebuilder:validation:Enum=Live;None
type MigrationStrategy string

const (
	// MigrationStrategyLive: a running VM moves only live (MachineMigrations and host
	// maintenance); a stopped VM moves offline.
	MigrationStrategyLive MigrationStrategy = "Live"
	// MigrationStrategyNone: the VM never moves. MachineMigrations of it fail with
	// MigrationForbidden and host maintenance leaves it where it is (and says so).
	MigrationStrategyNone MigrationStrategy = "None"
)

// MigrationPolicy is how a persistent claim's VM may move between hosts.
type MigrationPolicy struct {
	// strategy: Live (the default) or None.
	// +optional
	// +kubebuilder:default=Live
	Strategy MigrationStrategy `json:"strategy,omitempty"`

	// allowLocalDisks lets a migration copy disks on storage only the source host has
	// (withLocalDisks); the copy takes as long as the disks are large. Host maintenance copies
	// them only if this is set.
	// +optional
	AllowLocalDisks bool `json:"allowLocalDisks,omitempty"`
}

// Migration is spec.migrationPolicy with its defaults.
func (s *MachineClaimLifecycleSpec) Migration() MigrationPolicy {
	if s.MigrationPolicy == nil {
		return MigrationPolicy{Strategy: MigrationStrategyLive}
	}
	p := *s.MigrationPolicy
	if p.Strategy == "" {
		p.Strategy = MigrationStrategyLive
	}
	return p
}

// DefaultTerminationGracePeriod is how long a persistent VM's guest gets to shut down before it
// is powered off, when spec.terminationGracePeriodSeconds is unset.
const DefaultTerminationGracePeriod = 180 * time.Second

// LifecycleHook is a command run inside the guest through the hypervisor's guest agent.
type LifecycleHook struct {
	// command is the program and its arguments, run without a shell.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command"`

	// timeoutSeconds bounds the command. A hook that does not finish in time, exits non-zero or
	// cannot run (no guest agent) is reported with an Event and the operation goes on: a hook
	// never keeps a VM from starting or stopping.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// LifecycleHooks are commands run in the guest around power changes of a persistent VM.
type LifecycleHooks struct {
	// preStart runs right after HyperFleet starts the VM, once the guest agent answers (a VM
	// that is off cannot run anything before it boots): use it to warm caches or to register the
	// machine somewhere.
	// +optional
	PreStart *LifecycleHook `json:"preStart,omitempty"`

	// preStop runs before HyperFleet stops the VM (a Halted or Manual stop, or the claim's
	// deletion). The stop waits for it, then asks the guest to shut down and powers the VM off
	// after terminationGracePeriodSeconds.
	// +optional
	PreStop *LifecycleHook `json:"preStop,omitempty"`
}

// MachineClaimLifecycleSpec is the part of MachineClaimSpec about long-lived VMs. It is inlined.
type MachineClaimLifecycleSpec struct {
	// lifecycle is Ephemeral (the default: a one-job runner, destroyed once it stops) or
	// Persistent (a long-lived VM that the sweep never destroys). It cannot change.
	// +optional
	// +kubebuilder:default=Ephemeral
	Lifecycle Lifecycle `json:"lifecycle,omitempty"`

	// runStrategy of a Persistent claim: Always, RerunOnFailure, Halted, Manual or Once, with
	// KubeVirt's meaning. Required for, and only allowed with, lifecycle Persistent.
	// +optional
	RunStrategy RunStrategy `json:"runStrategy,omitempty"`

	// hooks are commands run in the guest before a stop and after a start; Persistent only.
	// +optional
	Hooks *LifecycleHooks `json:"hooks,omitempty"`

	// terminationGracePeriodSeconds is how long a stopping persistent VM's guest gets to shut
	// down before it is powered off. Default 180; 0 powers it off at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	TerminationGracePeriodSeconds *int32 `json:"terminationGracePeriodSeconds,omitempty"`

	// migrationPolicy says whether and how the VM may move between hosts (MachineMigrations and
	// host maintenance). Persistent claims only.
	// +optional
	MigrationPolicy *MigrationPolicy `json:"migrationPolicy,omitempty"`

	// placement restricts the hosts a persistent VM may run on: host selectors on the
	// HypervisorCluster's host labels, affinity and anti-affinity to other persistent VMs by
	// label. Persistent claims only. A change applies to the VM's next move, not to where it runs.
	// +optional
	Placement *PlacementSpec `json:"placement,omitempty"`
}

// IsPersistent reports whether the claim's VM is long-lived.
func (s *MachineClaimLifecycleSpec) IsPersistent() bool { return s.Lifecycle == LifecyclePersistent }

// TerminationGracePeriod is spec.terminationGracePeriodSeconds with its default.
func (s *MachineClaimLifecycleSpec) TerminationGracePeriod() time.Duration {
	if s.TerminationGracePeriodSeconds == nil {
		return DefaultTerminationGracePeriod
	}
	return time.Duration(*s.TerminationGracePeriodSeconds) * time.Second
}

// StopCause is how a VM came to be stopped, as far as the hypervisor tells.
// +kubebuilder:validation:Enum=GuestShutdown;HypervisorStop;Requested;Unknown;NeverStarted
type StopCause string

const (
	// StopCauseGuestShutdown: the guest powered itself off (no stop was asked of the hypervisor).
	StopCauseGuestShutdown StopCause = "GuestShutdown"
	// StopCauseHypervisorStop: a stop or shutdown was asked of the hypervisor by someone other than
	// HyperFleet (a person, HA fencing): a failure for RerunOnFailure.
	StopCauseHypervisorStop StopCause = "HypervisorStop"
	// StopCauseRequested: HyperFleet stopped the VM (runStrategy Halted or a Manual stop request).
	StopCauseRequested StopCause = "Requested"
	// StopCauseNeverStarted: the VM was made and has never run: runStrategy Halted, or Manual
	// without a Start request, keeps a new VM off, as KubeVirt creates such a VM stopped.
	StopCauseNeverStarted StopCause = "NeverStarted"
	// StopCauseUnknown: the hypervisor keeps no record of the stop.
	StopCauseUnknown StopCause = "Unknown"
)

// PowerRequestRecord is the last power request HyperFleet acted on or refused.
type PowerRequestRecord struct {
	// action is Start or Stop.
	// +kubebuilder:validation:MaxLength=16
	Action string `json:"action"`
	// time the request was taken.
	Time metav1.Time `json:"time"`
	// accepted is false when the run strategy did not allow it.
	Accepted bool `json:"accepted"`
}

// ResourceUsage is one resource of a VM: what it was given and what it uses.
type ResourceUsage struct {
	// allocated to the VM (CPU in cores, memory and disk in bytes).
	// +optional
	Allocated *resource.Quantity `json:"allocated,omitempty"`
	// used by the VM (CPU in cores, memory and disk in bytes) when last observed.
	// +optional
	Used *resource.Quantity `json:"used,omitempty"`
}

// MachineResourceUsage is a persistent VM's resource usage, refreshed by the sweep from its one
// listing of the hypervisor cluster (not a call per VM).
type MachineResourceUsage struct {
	// cpu in cores.
	// +optional
	CPU ResourceUsage `json:"cpu,omitempty"`
	// memory in bytes.
	// +optional
	Memory ResourceUsage `json:"memory,omitempty"`
	// disk in bytes: the VM's disks as the hypervisor accounts them.
	// +optional
	Disk ResourceUsage `json:"disk,omitempty"`
	// observedTime is when the sweep read these figures.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
}

// StopStage is how far a graceful stop has come.
// +kubebuilder:validation:Enum=PreStopHook;Shutdown;PowerOff
type StopStage string

const (
	StopStagePreStopHook StopStage = "PreStopHook"
	StopStageShutdown    StopStage = "Shutdown"
	StopStagePowerOff    StopStage = "PowerOff"
)

// GracefulStopStatus tracks a stop of a persistent VM: preStop hook, then a guest shutdown, then
// a power-off once the grace period is over. It lives in status so a restart resumes it.
type GracefulStopStatus struct {
	// stage reached.
	Stage StopStage `json:"stage"`
	// startTime of the stage, to the microsecond: the grace period is timed from it.
	StartTime metav1.MicroTime `json:"startTime"`
}

// HookStatus is a hook command running in the guest.
type HookStatus struct {
	// name is PreStart or PreStop.
	// +kubebuilder:validation:Enum=PreStart;PreStop
	Name string `json:"name"`
	// pid of the command in the guest, as the guest agent reported it.
	PID int64 `json:"pid"`
	// startTime of the command, to the microsecond: its timeout is timed from it.
	StartTime metav1.MicroTime `json:"startTime"`
}

// MachineClaimLifecycleStatus is the part of MachineClaimStatus about long-lived VMs. It is inlined.
type MachineClaimLifecycleStatus struct {
	// resources of a persistent VM: allocated and used CPU, memory and disk.
	// +optional
	Resources *MachineResourceUsage `json:"resources,omitempty"`

	// lastStopCause is how a persistent VM last came to be stopped.
	// +optional
	LastStopCause StopCause `json:"lastStopCause,omitempty"`

	// lastStopTime is when HyperFleet saw the persistent VM stopped.
	// +optional
	LastStopTime *metav1.Time `json:"lastStopTime,omitempty"`

	// lastPowerRequest is the last power request taken from the PowerRequestAnnotation.
	// +optional
	LastPowerRequest *PowerRequestRecord `json:"lastPowerRequest,omitempty"`

	// pendingStop is set while a power request or runStrategy Halted stops the VM.
	// +optional
	PendingStop *GracefulStopStatus `json:"pendingStop,omitempty"`

	// hook is the lifecycle hook running in the guest.
	// +optional
	Hook *HookStatus `json:"hook,omitempty"`

	// restartCount counts the times HyperFleet started the VM again after it stopped.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
}
