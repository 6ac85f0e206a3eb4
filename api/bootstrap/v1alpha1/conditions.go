package v1alpha1

// BootstrapConfig conditions and reasons.
const (
	// ReadyCondition summarises the bootstrap.
	ReadyCondition = "Ready"
	// PausedCondition is True while the Cluster or the object is paused.
	PausedCondition = "Paused"
	// DataSecretAvailableCondition is True once the bootstrap data Secret exists.
	DataSecretAvailableCondition = "DataSecretAvailable"
	// AttestedCondition is True once the VM proved its identity and fetched its configuration.
	AttestedCondition = "Attested"

	WaitingForOwnerMachineReason = "WaitingForOwnerMachine"
	WaitingForClusterReason      = "WaitingForClusterInfrastructure"
	DataSecretCreatedReason      = "DataSecretCreated"
	JoinTokenFailedReason        = "JoinTokenFailed"
	WaitingForAttestationReason  = "WaitingForAttestation"
	AttestedReason               = "Attested"
	TokenExpiredReason           = "TokenExpired"
	// JoinTokenRefreshedReason (an Event): a join token no VM had was replaced before it expired.
	JoinTokenRefreshedReason = "JoinTokenRefreshed"
	DataSecretFailedReason   = "DataSecretFailed"
	TokenRedeemedReason      = "TokenRedeemed"
	RunnerConfigFailedReason = "RunnerConfigFailed"
	// SPIREServerNotAllowedReason: spec.attestation.spireServerAddress names a SPIRE server other
	// than the manager's own; the manager does not connect to it.
	SPIREServerNotAllowedReason = "SPIREServerNotAllowed"
	// SPIREReleaseFailedReason: the SPIRE server could not be told to forget a deleted Machine.
	SPIREReleaseFailedReason = "SPIREReleaseFailed"
	// NamespaceNotEnabledReason: HyperFleet may not read or write Secrets in this namespace because
	// no admin has enabled it (docs/install.md, "Enabling a namespace").
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
)
