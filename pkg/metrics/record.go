package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of hyperfleet_webhook_deliveries_total.
const (
	WebhookAccepted         = "accepted"
	WebhookDuplicate        = "duplicate"
	WebhookIgnored          = "ignored"
	WebhookInvalidSignature = "invalid_signature"
	WebhookBadRequest       = "bad_request"
	WebhookTooLarge         = "too_large"
	WebhookQueueFull        = "queue_full"
	WebhookError            = "error"
)

// Values of the result label of hyperfleet_bootstrap_attestations_total.
const (
	AttestationSuccess      = "success"
	AttestationInvalidToken = "invalid_token"
	AttestationTokenExpired = "token_expired"
	AttestationTokenReused  = "token_reused"
	AttestationNotLive      = "not_live"
	AttestationBadRequest   = "bad_request"
	AttestationTPMFailed    = "tpm_failed"
	AttestationError        = "error"
)

// Values of the state label of hyperfleet_runnerpool_replicas.
const (
	PoolDesired = "desired"
	PoolCurrent = "current"
	PoolReady   = "ready"
	PoolIdle    = "idle"
	PoolBusy    = "busy"
	// PoolWarm counts warm VMs: cloned, configured, stopped (status.warmReplicas).
	PoolWarm = "warm"
)

// Values of the path label of hyperfleet_job_pickup_seconds.
const (
	PickupHot  = "hot"
	PickupWarm = "warm"
	PickupCold = "cold"
)

// Other replaces a result a caller passed that the contract does not list, so a typo or a new
// code path cannot create series nobody alerts on.
const Other = "other"

var (
	webhookResults = set(WebhookAccepted, WebhookDuplicate, WebhookIgnored, WebhookInvalidSignature,
		WebhookBadRequest, WebhookTooLarge, WebhookQueueFull, WebhookError)
	pickupPaths        = set(PickupHot, PickupWarm, PickupCold)
	attestationResults = set(AttestationSuccess, AttestationInvalidToken, AttestationTokenExpired,
		AttestationTokenReused, AttestationNotLive, AttestationBadRequest, AttestationTPMFailed, AttestationError)
)

// ObserveProvisioning records how long a VM took from the start of its clone to Ready.
func ObserveProvisioning(cluster string, d time.Duration) {
	VMProvisioningDuration.WithLabelValues(cluster).Observe(d.Seconds())
}

// ProvisioningResult counts a provisioning outcome. reason is the MachineClaim's Ready condition
// reason (a bounded CamelCase set); it is dropped on success so successes form one series.
func ProvisioningResult(cluster, reason string, ok bool) {
	result := "failure"
	if ok {
		result, reason = "success", ""
	}
	VMProvisioningTotal.WithLabelValues(cluster, result, reason).Inc()
}

// ProviderProxmox is the provider label value of Proxmox VE; the value of every provider is the
// lower-case spelling of the HypervisorCluster's spec.provider.
const ProviderProxmox = "proxmox"

// ObserveProviderCall records one hypervisor provider call: provider is the provider label value,
// operation the Provider method name and reason the error class (hypervisor.Reason), empty on success.
func ObserveProviderCall(provider, operation, reason string, d time.Duration) {
	code := "ok"
	if reason != "" {
		code = reason
		HypervisorAPIErrors.WithLabelValues(provider, operation, reason).Inc()
	}
	HypervisorAPIRequestDuration.WithLabelValues(provider, operation, code).Observe(d.Seconds())
	if provider == ProviderProxmox {
		if reason != "" {
			DeprecatedProxmoxAPIErrors.WithLabelValues(operation, reason).Inc()
		}
		DeprecatedProxmoxAPIRequestDuration.WithLabelValues(operation, code).Observe(d.Seconds())
	}
}

// ObserveTask records a finished hypervisor task; op is the Provider method that started it.
func ObserveTask(provider, op string, d time.Duration) {
	HypervisorTaskDuration.WithLabelValues(provider, op).Observe(d.Seconds())
	if provider == ProviderProxmox {
		DeprecatedProxmoxTaskDuration.WithLabelValues(op).Observe(d.Seconds())
	}
}

// WebhookDelivery counts one webhook delivery; use the Webhook* constants.
func WebhookDelivery(result string) {
	WebhookDeliveries.WithLabelValues(bounded(result, webhookResults)).Inc()
}

// ObserveJobPickup records the time from a job being queued to it running on a HyperFleet runner.
func ObserveJobPickup(d time.Duration) {
	JobPickupLatency.Observe(d.Seconds())
}

// ObservePickup records a job's pickup latency on a platform's runner by path (the Pickup* constants).
func ObservePickup(platform, path string, d time.Duration) {
	JobPickupSeconds.WithLabelValues(platformLabel(platform), bounded(path, pickupPaths)).Observe(max(d, 0).Seconds())
}

// SetPool publishes a RunnerPool's replica counts and queued jobs, as in its status.
func SetPool(ns, name string, desired, current, ready, idle, busy, queued int) {
	for state, n := range map[string]int{
		PoolDesired: desired, PoolCurrent: current, PoolReady: ready, PoolIdle: idle, PoolBusy: busy,
	} {
		RunnerPoolReplicas.WithLabelValues(ns, name, state).Set(float64(n))
	}
	RunnerPoolQueuedJobs.WithLabelValues(ns, name).Set(float64(queued))
}

// SetPoolWarm publishes a RunnerPool's warm VMs (status.warmReplicas).
func SetPoolWarm(ns, name string, warm int) {
	RunnerPoolReplicas.WithLabelValues(ns, name, PoolWarm).Set(float64(warm))
}

// DeletePool removes a deleted RunnerPool's series, so it does not linger at its last values.
func DeletePool(ns, name string) {
	labels := prometheus.Labels{"namespace": ns, "pool": name}
	RunnerPoolReplicas.DeletePartialMatch(labels)
	RunnerPoolQueuedJobs.DeletePartialMatch(labels)
}

// Attestation counts one attestation attempt at the bootstrap service; use the Attestation* constants.
func Attestation(result string) {
	BootstrapAttestations.WithLabelValues(bounded(result, attestationResults)).Inc()
}

// SetGitHubRateLimit publishes the requests left in the current GitHub rate-limit window.
func SetGitHubRateLimit(n int) {
	GitHubRateLimitRemaining.Set(float64(n))
}

// platforms bounds the platform label: the platforms HyperFleet ships and every platform that
// registers its driver (AllowPlatform).
var platforms = set("github", "gitlab", "buildkite")

var platformsMu sync.RWMutex

// AllowPlatform lets a CI platform's kind label the platform metrics; pkg/platform calls it for
// every driver that registers. Any other value is reported as "other".
func AllowPlatform(kind string) {
	platformsMu.Lock()
	defer platformsMu.Unlock()
	platforms[kind] = true
}

func platformLabel(kind string) string {
	platformsMu.RLock()
	defer platformsMu.RUnlock()
	return bounded(kind, platforms)
}

// PlatformRateLimit counts one API call a CI platform refused for its rate limits.
func PlatformRateLimit(platform string) {
	PlatformRateLimited.WithLabelValues(platformLabel(platform)).Inc()
}

func set(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

func bounded(v string, allowed map[string]bool) string {
	if allowed[v] {
		return v
	}
	return Other
}

// VMPoolCounts are a VMPool's VMs by state, as in its status.
type VMPoolCounts struct {
	Desired, Current, Ready, Available, Updated, Unavailable int
}

// SetVMPool publishes a VMPool's VM counts and its VMs' average CPU and memory use (nil when no
// running VM reports it: the series is removed rather than left at a stale value).
func SetVMPool(ns, name string, c VMPoolCounts, cpu, memory *float64) {
	for state, n := range map[string]int{
		"desired": c.Desired, "current": c.Current, "ready": c.Ready,
		"available": c.Available, "updated": c.Updated, "unavailable": c.Unavailable,
	} {
		VMPoolReplicas.WithLabelValues(ns, name, state).Set(float64(n))
	}
	for g, v := range map[*prometheus.GaugeVec]*float64{VMPoolCPUUtilisation: cpu, VMPoolMemoryUtilisation: memory} {
		if v == nil {
			g.DeleteLabelValues(ns, name)
			continue
		}
		g.WithLabelValues(ns, name).Set(*v)
	}
}

// DeleteVMPool removes a deleted VMPool's series.
func DeleteVMPool(ns, name string) {
	labels := prometheus.Labels{"namespace": ns, "pool": name}
	VMPoolReplicas.DeletePartialMatch(labels)
	VMPoolCPUUtilisation.DeletePartialMatch(labels)
	VMPoolMemoryUtilisation.DeletePartialMatch(labels)
}
