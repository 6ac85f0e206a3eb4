package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// HostStatus is how far the drain of one host in maintenance has come. Only hosts in maintenance,
// and hosts that still hold VMs HyperFleet was moving away, are listed.
type HostStatus struct {
	// name of the host.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// maintenance is the host's flag in spec.hosts.
	Maintenance bool `json:"maintenance"`

	// persistentVMs is the number of persistent VMs still on the host.
	// +optional
	PersistentVMs int32 `json:"persistentVMs,omitempty"`

	// runners is the number of ephemeral runners still on the host: idle ones are retired and
	// replaced elsewhere, busy ones finish their job first.
	// +optional
	Runners int32 `json:"runners,omitempty"`

	// pendingMigrations is the number of MachineMigrations the drain created for the host that
	// have not ended yet.
	// +optional
	PendingMigrations int32 `json:"pendingMigrations,omitempty"`

	// drained is true once no VM of HyperFleet is left on a host in maintenance.
	// +optional
	Drained bool `json:"drained,omitempty"`

	// blockedBy lists the persistent VMs the drain cannot move, each with why: a migrationPolicy
	// of None, no host that satisfies its placement and has the memory, or every migration
	// attempt failed.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	BlockedBy []string `json:"blockedBy,omitempty"`

	// failedMigrations lists the persistent VMs on the host whose last drain migration failed:
	// each is tried again after a backoff that grows with every attempt, until the drain gives
	// up on it (then HostsDrained is False with reason MigrationFailed).
	// +optional
	// +listType=map
	// +listMapKey=machineClaim
	// +kubebuilder:validation:MaxItems=64
	FailedMigrations []DrainMigrationFailure `json:"failedMigrations,omitempty"`
}

// DrainMigrationFailure is a persistent VM whose drain migration failed.
type DrainMigrationFailure struct {
	// machineClaim is the name of the VM's MachineClaim.
	// +kubebuilder:validation:MaxLength=253
	MachineClaim string `json:"machineClaim"`

	// attempts is how many migrations of the VM have failed in a row.
	Attempts int32 `json:"attempts"`

	// lastFailure is why the last one failed.
	// +kubebuilder:validation:MaxLength=1024
	LastFailure string `json:"lastFailure"`

	// lastFailureTime is when it failed.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// nextAttemptTime is when the next migration of the VM starts; absent once the drain gave up.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
}

// HostMaintenanceAnnotation is set by HyperFleet on the Machine of an ephemeral runner whose VM
// runs on a host in maintenance, to the host's name: the RunnerPool retires the runner once it
// runs no job (a busy runner finishes its job first) and its replacement goes to another host.
// It is removed when the host leaves maintenance.
const HostMaintenanceAnnotation = "infrastructure.cluster.x-k8s.io/host-maintenance"

// Host drain condition and reasons of a HypervisorCluster.
const (
	// HypervisorClusterHostsDrainedCondition is True when every host in maintenance is empty
	// (or none is in maintenance), False while a drain moves VMs away or is blocked.
	HypervisorClusterHostsDrainedCondition = "HostsDrained"

	// NoMaintenanceReason: no host is in maintenance.
	NoMaintenanceReason = "NoMaintenance"
	// HostsDrainedReason: every host in maintenance is empty.
	HostsDrainedReason = "Drained"
	// DrainingReason: migrations and runner retirements are under way.
	DrainingReason = "Draining"
	// DrainBlockedReason: a persistent VM on a host in maintenance cannot move (its
	// migrationPolicy is None, or no host fits it); the message says why.
	DrainBlockedReason = "DrainBlocked"
	// DrainMigrationFailedReason: every migration the drain tried for a persistent VM failed, up
	// to the last attempt; the message names the VM, its last MachineMigration and the error.
	DrainMigrationFailedReason = "MigrationFailed"
)

// Event reasons of a HypervisorCluster.
const (
	// DrainMigrationEventReason: the drain created a MachineMigration moving a persistent VM off a
	// host in maintenance.
	DrainMigrationEventReason = "DrainMigration"
	// InstallationIDEventReason: the HypervisorCluster recorded its installation ID, which marks
	// its VMs.
	InstallationIDEventReason = "InstallationID"
)
