package v1alpha1

// RunnerPool conditions and reasons.
const (
	// ReadyCondition summarises the pool.
	ReadyCondition = "Ready"
	// ScalingLimitedCondition is True while demand exceeds maxReplicas.
	ScalingLimitedCondition = "ScalingLimited"
	// GitHubAvailableCondition is True while the GitHub API answers with the pool's credentials.
	GitHubAvailableCondition = "GitHubAvailable"
	// InsecureTransportCondition is True while the GitHub API is reached over plain http://
	// (spec.github.allowInsecureHTTP): credentials and tokens travel in clear text.
	InsecureTransportCondition = "InsecureTransport"

	ScaledReason                    = "Scaled"
	ScalingUpReason                 = "ScalingUp"
	ScalingDownReason               = "ScalingDown"
	MaxReplicasReachedReason        = "MaxReplicasReached"
	GitHubCredentialsNotFoundReason = "CredentialsNotFound"
	GitHubUnavailableReason         = "GitHubUnavailable"
	GitHubAvailableReason           = "GitHubAvailable"
	// NamespaceNotEnabledReason: HyperFleet may not read or write Secrets in this namespace because
	// no admin has enabled it (docs/install.md, "Enabling a namespace").
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
	// GitHubCABundleInvalidReason: spec.github.caBundleRef names a missing Secret or key, or its
	// data holds no parsable PEM certificate; nothing is sent to GitHub.
	GitHubCABundleInvalidReason = "CABundleInvalid"
	// GitHubTLSErrorReason: the GitHub API's certificate did not verify against the CA bundle (or
	// the system roots); the TLS handshake failed before any credential was sent.
	GitHubTLSErrorReason = "TLSError"
	// PlainHTTPReason: spec.github.apiURL is http://.
	PlainHTTPReason = "PlainHTTP"
	// HTTPSReason: the GitHub API is reached over https://.
	HTTPSReason = "HTTPS"
	// InsecureURLRefusedReason: apiURL is http:// without allowInsecureHTTP; nothing is sent there.
	InsecureURLRefusedReason = "InsecureURLRefused"
)
