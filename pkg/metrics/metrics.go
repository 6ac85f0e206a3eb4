package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	apiBuckets  = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	taskBuckets = []float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
)

// The collectors are exported so tests and the bootstrap service's own registry can reach them;
// record through the helper functions, which keep label values bounded.
var (
	VMProvisioningDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_vm_provisioning_duration_seconds",
		Help:    "Time from the start of a VM's clone to its MachineClaim becoming Ready.",
		Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
	}, []string{"hypervisor_cluster"})

	VMProvisioningTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_vm_provisioning_total",
		Help: "VM provisioning outcomes by hypervisor cluster, result and failure reason.",
	}, []string{"hypervisor_cluster", "result", "reason"})

	HypervisorAPIRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_hypervisor_api_request_duration_seconds",
		Help:    "Duration of hypervisor provider calls by provider, operation and outcome code.",
		Buckets: apiBuckets,
	}, []string{"provider", "operation", "code"})

	HypervisorAPIErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_hypervisor_api_errors_total",
		Help: "Failed hypervisor provider calls by provider, operation and error class.",
	}, []string{"provider", "operation", "reason"})

	HypervisorTaskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_hypervisor_task_duration_seconds",
		Help:    "Time from a hypervisor task being started to it being seen finished, by provider and task type.",
		Buckets: taskBuckets,
	}, []string{"provider", "type"})

	// The Proxmox-named metrics are kept for one release so dashboards and alerts can move; they
	// record the Proxmox provider's calls only, exactly as before.

	DeprecatedProxmoxAPIRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_proxmox_api_request_duration_seconds",
		Help:    "Deprecated: use hyperfleet_hypervisor_api_request_duration_seconds{provider=\"proxmox\"}.",
		Buckets: apiBuckets,
	}, []string{"operation", "code"})

	DeprecatedProxmoxAPIErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_proxmox_api_errors_total",
		Help: "Deprecated: use hyperfleet_hypervisor_api_errors_total{provider=\"proxmox\"}.",
	}, []string{"operation", "reason"})

	DeprecatedProxmoxTaskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_proxmox_task_duration_seconds",
		Help:    "Deprecated: use hyperfleet_hypervisor_task_duration_seconds{provider=\"proxmox\"}.",
		Buckets: taskBuckets,
	}, []string{"type"})

	WebhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_webhook_deliveries_total",
		Help: "CI platform webhook deliveries received, by result.",
	}, []string{"result"})

	JobPickupLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hyperfleet_job_pickup_latency_seconds",
		Help:    "Time from a job being queued to it starting on a HyperFleet runner.",
		Buckets: []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200},
	})

	HistoryPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hyperfleet_history_pending_records",
		Help: "Pieces of job records and audit entries waiting to be written to the history store.",
	})

	HistoryWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_history_writes_total",
		Help: "Attempts to write a piece of a job record or an audit entry to the history store, by result (ok, error).",
	}, []string{"result"})

	HistoryStoreUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hyperfleet_history_store_up",
		Help: "1 when the last write to the history store succeeded, 0 while it fails (records are kept and retried).",
	})

	HistorySealed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hyperfleet_history_sealed_records_total",
		Help: "Job records signed with the installation's provenance key once their job finished (or was closed as unknown: no completion came within an hour of the VM's destruction) and their VM was gone.",
	})

	HistoryDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hyperfleet_history_dropped_records_total",
		Help: "Pieces of job records and audit entries dropped because the queue kept while the history store was unavailable was full.",
	})

	JobPickupSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hyperfleet_job_pickup_seconds",
		Help: "Time from a job being queued to it starting on a HyperFleet runner, from the job ledger, by CI platform " +
			"and path: hot (an idle booted runner took it), warm (a warm VM started for it) or cold (a VM cloned for it).",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200},
	}, []string{"platform", "path"})

	RunnerPoolReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_runnerpool_replicas",
		Help: "Runners of a RunnerPool by state (desired, current, ready, idle, busy).",
	}, []string{"namespace", "pool", "state"})

	RunnerPoolQueuedJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_runnerpool_queued_jobs",
		Help: "Jobs a RunnerPool can serve that wait for a runner.",
	}, []string{"namespace", "pool"})

	VMPoolReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_vmpool_replicas",
		Help: "A VMPool's VMs by state: desired, current, ready, available, updated, unavailable.",
	}, []string{"namespace", "pool", "state"})

	VMPoolCPUUtilisation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_vmpool_cpu_utilisation_ratio",
		Help: "Average CPU use of a VMPool's running VMs, as a ratio of the cores they were given.",
	}, []string{"namespace", "pool"})

	VMPoolMemoryUtilisation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_vmpool_memory_utilisation_ratio",
		Help: "Average memory use of a VMPool's running VMs, as a ratio of the memory they were given.",
	}, []string{"namespace", "pool"})

	BootstrapAttestations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_bootstrap_attestations_total",
		Help: "Attestation attempts of VMs at the bootstrap service, by result.",
	}, []string{"result"})

	GitHubRateLimitRemaining = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hyperfleet_github_rate_limit_remaining",
		Help: "Requests left in the current GitHub API rate-limit window.",
	})

	PlatformRateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperfleet_platform_rate_limited_total",
		Help: "CI platform API calls refused by the platform's rate limits (primary or secondary), by platform.",
	}, []string{"platform"})
)

// Renamed maps each deprecated metric name to the name that replaces it. The deprecated names are
// still served with the same observations and go away in the next release; dashboards chart the new
// names only.
var Renamed = map[string]string{
	"hyperfleet_proxmox_api_request_duration_seconds": "hyperfleet_hypervisor_api_request_duration_seconds",
	"hyperfleet_proxmox_api_errors_total":             "hyperfleet_hypervisor_api_errors_total",
	"hyperfleet_proxmox_task_duration_seconds":        "hyperfleet_hypervisor_task_duration_seconds",
}

// Collectors returns every HyperFleet collector, for processes that serve their own registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		VMProvisioningDuration, VMProvisioningTotal,
		HypervisorAPIRequestDuration, HypervisorAPIErrors, HypervisorTaskDuration,
		DeprecatedProxmoxAPIRequestDuration, DeprecatedProxmoxAPIErrors, DeprecatedProxmoxTaskDuration,
		WebhookDeliveries, JobPickupLatency, JobPickupSeconds,
		HistoryPending, HistoryWrites, HistoryStoreUp, HistorySealed, HistoryDropped,
		RunnerPoolReplicas, RunnerPoolQueuedJobs,
		VMPoolReplicas, VMPoolCPUUtilisation, VMPoolMemoryUtilisation,
		BootstrapAttestations, GitHubRateLimitRemaining, PlatformRateLimited,
		HypervisorQueueDepth, HypervisorQueueWait, HypervisorInFlight,
	}
}

// Registering at import means no process can forget it: controller-runtime serves this registry on
// the manager's metrics endpoint.
func init() {
	crmetrics.Registry.MustRegister(Collectors()...)
}
