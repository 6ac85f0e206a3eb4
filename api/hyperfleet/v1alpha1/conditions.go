package v1alpha1

// RunnerPool conditions and reasons. They are the same for every CI platform; the message names
// the platform. Before spec.platform, GitHubAvailable was the condition PlatformAvailable is, and
// the reasons GitHubUnavailable and GitHubAvailable are now PlatformUnavailable and
// PlatformAvailable (docs/platforms.md).
const (
	// ReadyCondition summarises the pool.
	ReadyCondition = "Ready"
	// ScalingLimitedCondition is True while demand exceeds maxReplicas.
	ScalingLimitedCondition = "ScalingLimited"
	// PlatformAvailableCondition is True while the CI platform's API answers with the pool's
	// credentials.
	PlatformAvailableCondition = "PlatformAvailable"
	// PlatformRateLimitedCondition is True while the CI platform refuses the pool's calls for its
	// rate limits; the message says when they lift. The pool does not call the platform before then.
	PlatformRateLimitedCondition = "PlatformRateLimited"
	// InsecureTransportCondition is True while the CI platform's API is reached over plain
	// http:// (spec.platform.*.allowInsecureHTTP): credentials and tokens travel in clear text.
	InsecureTransportCondition = "InsecureTransport"
	// HistoryRecordedCondition is True while the manager writes job records to its history store
	// and False while the store is unavailable (records wait in order and are retried); absent
	// when the manager keeps no job history (docs/history.md).
	HistoryRecordedCondition = "HistoryRecorded"
	// HistoryStoreReachableReason (HistoryRecorded True) and HistoryStoreUnavailableReason
	// (HistoryRecorded False).
	HistoryStoreReachableReason   = "HistoryStoreReachable"
	HistoryStoreUnavailableReason = "HistoryStoreUnavailable"

	// ClusterNotFoundReason (Ready False): spec.clusterName names no Cluster.
	ClusterNotFoundReason = "ClusterNotFound"
	// ClusterDeletingReason (Ready False): the Cluster is being deleted; every runner is removed.
	ClusterDeletingReason = "ClusterDeleting"
	// PoolDeletingReason (Ready False): the pool is being deleted, waiting for its Machines to go.
	PoolDeletingReason = "Deleting"
	// PoolTemplateNotFoundReason (Ready False): a template the pool names does not exist.
	PoolTemplateNotFoundReason = "TemplateNotFound"
	// PendingReason (Unknown): no reconcile has set the condition yet.
	PendingReason = "Pending"

	ScaledReason             = "Scaled"
	ScalingUpReason          = "ScalingUp"
	ScalingDownReason        = "ScalingDown"
	MaxReplicasReachedReason = "MaxReplicasReached"
	// NoTargetAvailableReason (Ready False): every one of spec.template.targets is down, full or
	// failing; status.targets says why each is skipped.
	NoTargetAvailableReason = "NoTargetAvailable"
	// CredentialsNotFoundReason: the credentials Secret is missing or unusable.
	CredentialsNotFoundReason = "CredentialsNotFound"
	// PlatformUnavailableReason: the platform's API failed or refused the credentials.
	PlatformUnavailableReason = "PlatformUnavailable"
	// PlatformAvailableReason: the last repair read the platform's API.
	PlatformAvailableReason = "PlatformAvailable"
	// UnsupportedPlatformReason: spec.platform names a platform this manager has no driver for.
	UnsupportedPlatformReason = "UnsupportedPlatform"
	// NamespaceNotEnabledReason: HyperFleet may not read or write Secrets in this namespace because
	// no admin has enabled it (docs/install.md, "Enabling a namespace").
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
	// CABundleInvalidReason: caBundleRef names a missing Secret or key, or its data holds no
	// parsable PEM certificate; nothing is sent to the platform.
	CABundleInvalidReason = "CABundleInvalid"
	// TLSErrorReason: the platform API's certificate did not verify against the CA bundle (or the
	// system roots); the TLS handshake failed before any credential was sent.
	TLSErrorReason = "TLSError"
	// RateLimitedReason: the platform answered with a rate limit (PlatformRateLimited True).
	RateLimitedReason = "RateLimited"
	// NotRateLimitedReason: the last calls were not rate limited (PlatformRateLimited False).
	NotRateLimitedReason = "NotRateLimited"
	// BudgetReservedReason (PlatformRateLimited False): the platform still answers, but the repair
	// paused until status.repairResumeTime to keep the rest of the rate-limit budget for runner
	// registrations and deregistrations, which go on.
	BudgetReservedReason = "BudgetReserved"
	// PlainHTTPReason: the platform's API URL is http://.
	PlainHTTPReason = "PlainHTTP"
	// HTTPSReason: the platform's API is reached over https://.
	HTTPSReason = "HTTPS"
	// InsecureURLRefusedReason: the API URL is http:// without allowInsecureHTTP; nothing is sent there.
	InsecureURLRefusedReason = "InsecureURLRefused"
)
