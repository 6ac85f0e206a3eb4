package v1alpha1

// Conditions shared by HyperFleet's infrastructure kinds.
const (
	// ReadyCondition summarises an object's health; Cluster API mirrors a MachineClaim's Ready into the
	// Machine's InfrastructureReady.
	ReadyCondition = "Ready"
	// PausedCondition is True while the Cluster or the object is paused.
	PausedCondition = "Paused"
	// PausedReason and NotPausedReason are the Paused condition's reasons.
	PausedReason    = "Paused"
	NotPausedReason = "NotPaused"
	// DeletingReason marks Ready False while an object is being deleted.
	DeletingReason = "Deleting"
)

// HypervisorCluster conditions and reasons.
const (
	// HypervisorClusterAvailableCondition is True when the API answers and the credentials carry the
	// privileges HyperFleet needs.
	HypervisorClusterAvailableCondition = "Available"

	HypervisorClusterAvailableReason           = "Available"
	HypervisorClusterCredentialsNotFoundReason = "CredentialsNotFound"
	HypervisorClusterCredentialsInvalidReason  = "CredentialsInvalid"
	HypervisorClusterCABundleNotFoundReason    = "CABundleNotFound"
	HypervisorClusterUnreachableReason         = "Unreachable"
	HypervisorClusterTLSErrorReason            = "TLSError"
	HypervisorClusterUnauthorizedReason        = "Unauthorized"
	HypervisorClusterForbiddenReason           = "Forbidden"
	HypervisorClusterNoNodesReason             = "NoAllowedNodes"
	HypervisorClusterInsecureReason            = "AvailableInsecure"
	HypervisorClusterUnsupportedProviderReason = "UnsupportedProvider"
	HypervisorClusterUnsupportedSettingReason  = "UnsupportedSetting"
	// HypervisorClusterInsecureTransportCondition is True while the hypervisor API is reached over
	// plain http:// (credentials in clear text) or without TLS verification.
	HypervisorClusterInsecureTransportCondition = "InsecureTransport"
	// HypervisorClusterPlainHTTPReason: the endpoint is http:// (allowInsecureHTTP).
	HypervisorClusterPlainHTTPReason = "PlainHTTP"
	// HypervisorClusterTLSUnverifiedReason: TLS verification is off (insecureSkipTLSVerify).
	HypervisorClusterTLSUnverifiedReason = "TLSUnverified"
	// HypervisorClusterSecureTransportReason: https:// with a verified certificate.
	HypervisorClusterSecureTransportReason = "VerifiedTLS"
	// HypervisorClusterLongLivedVMPrivilegesCondition is True when the credentials also carry the
	// privileges long-lived VMs' features use (snapshots, restores, hooks, migration). They are not
	// needed for runners, so False is a warning: Available and Ready do not depend on it.
	HypervisorClusterLongLivedVMPrivilegesCondition = "LongLivedVMPrivileges"
	// HypervisorClusterPrivilegesPresentReason: every such privilege is there.
	HypervisorClusterPrivilegesPresentReason = "PrivilegesPresent"
	// HypervisorClusterPrivilegesMissingReason: the message names each missing privilege and the
	// feature that needs it.
	HypervisorClusterPrivilegesMissingReason = "PrivilegesMissing"
	// HypervisorClusterIdentityPendingReason: the installation ID is not recorded yet; no VM is
	// touched without it.
	HypervisorClusterIdentityPendingReason = "IdentityPending"
	// NamespaceNotEnabledReason: HyperFleet may not read or write Secrets in this namespace because
	// no admin has enabled it (docs/install.md, "Enabling a namespace").
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
)

// MachineClaim conditions and reasons.
const (
	// MachineClaimVMProvisionedCondition is True once the VM exists, is configured and runs.
	MachineClaimVMProvisionedCondition = "VMProvisioned"
	// MachineClaimBootstrapReadyCondition is True once the VM's agent proved its identity and
	// fetched its configuration.
	MachineClaimBootstrapReadyCondition = "BootstrapReady"

	WaitingForOwnerMachineReason          = "WaitingForOwnerMachine"
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	WaitingForBootstrapDataReason         = "WaitingForBootstrapData"
	HypervisorClusterNotFoundReason       = "HypervisorClusterNotFound"
	HypervisorClusterUnavailableReason    = "HypervisorClusterUnavailable"
	TemplateNotFoundReason                = "TemplateNotFound"
	NoCapacityReason                      = "NoCapacity"
	CloningReason                         = "Cloning"
	ConfiguringReason                     = "Configuring"
	StartingReason                        = "Starting"
	WaitingForAddressReason               = "WaitingForAddress"
	WaitingForBootstrapReason             = "WaitingForBootstrap"
	VMRunningReason                       = "VMRunning"
	VMStoppedReason                       = "VMStopped"
	VMNotFoundReason                      = "VMNotFound"
	// TaskTimedOutReason: a hypervisor task of a deleting claim ran past its deadline; the claim
	// looked at the VM again and acted anew.
	TaskTimedOutReason = "TaskTimedOut"
	// VMAdoptedReason: the claim's VM still carried the ownership marks of a HyperFleet release
	// before installation identities and was re-marked.
	VMAdoptedReason          = "VMAdopted"
	BootstrappedReason       = "Bootstrapped"
	ProvisioningFailedReason = "ProvisioningFailed"
	// ProviderMismatchReason: the claim carries settings of another provider than its
	// HypervisorCluster's (spec.proxmox on a Hyper-V cluster); no VM is made until they match.
	ProviderMismatchReason = "ProviderMismatch"
	HypervisorErrorReason  = "HypervisorError"
	ReadyReason            = "Ready"
)

// MachineClaimTemplate conditions and reasons.
const (
	// MachineClaimTemplateResolvedCondition is True when the source VM template exists.
	MachineClaimTemplateResolvedCondition = "TemplateResolved"
	// MachineClaimTemplateCapacityCondition is True when an allowed node can hold the VM.
	MachineClaimTemplateCapacityCondition = "CapacityAvailable"

	TemplateResolvedReason = "TemplateResolved"
	// TemplateAmbiguousReason: the selector matches two templates on one node. MachineClaims
	// use it too.
	TemplateAmbiguousReason = "TemplateAmbiguous"
	CapacityAvailableReason = "CapacityAvailable"
)

// Persistent MachineClaim conditions and reasons.
const (
	// MachineClaimLiveMigratableCondition is True when the VM could move to another host while it
	// runs.
	MachineClaimLiveMigratableCondition = "LiveMigratable"

	// LiveMigratableReason: the VM runs and all its disks are on shared storage.
	LiveMigratableReason = "Migratable"
	// NotRunningReason: a stopped VM is moved offline, not live.
	NotRunningReason = "NotRunning"
	// LocalDisksReason: a disk of the VM is on storage only its host has.
	LocalDisksReason = "LocalDisks"
	// LocalResourcesReason: the VM uses a device of its host (PCI, USB) that cannot move.
	LocalResourcesReason = "LocalResources"
	// MigratabilityUnknownReason: not checked yet since the VM started.
	MigratabilityUnknownReason = "Unknown"
	// MigrationCheckFailedReason: the hypervisor did not answer the check (e.g. the token lacks
	// VM.Migrate) or this provider cannot tell; it is checked again after the next start.
	MigrationCheckFailedReason = "CheckFailed"

	// VMStoppedByRunStrategyReason: the persistent VM is off as its run strategy wants.
	VMStoppedByRunStrategyReason = "StoppedByRunStrategy"
	// RestartingReason: the persistent VM stopped and its run strategy starts it again.
	RestartingReason = "Restarting"
	// StoppingReason: HyperFleet is stopping the VM (hook, guest shutdown, power-off).
	StoppingReason = "Stopping"
	// PowerRequestRefusedReason: a power request was refused because the run strategy is not Manual.
	PowerRequestRefusedReason = "PowerRequestRefused"
	// HookFailedReason: a lifecycle hook exited non-zero, timed out or could not run.
	HookFailedReason = "HookFailed"
)
