package metrics

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// contract lists the names docs/metrics.md promises.
var contract = []string{
	"hyperfleet_vm_provisioning_duration_seconds",
	"hyperfleet_vm_provisioning_total",
	"hyperfleet_hypervisor_api_request_duration_seconds",
	"hyperfleet_hypervisor_api_errors_total",
	"hyperfleet_hypervisor_task_duration_seconds",
	// Deprecated aliases, served for one release.
	"hyperfleet_proxmox_api_request_duration_seconds",
	"hyperfleet_proxmox_api_errors_total",
	"hyperfleet_proxmox_task_duration_seconds",
	"hyperfleet_webhook_deliveries_total",
	"hyperfleet_job_pickup_latency_seconds",
	"hyperfleet_job_pickup_seconds",
	"hyperfleet_history_pending_records",
	"hyperfleet_history_writes_total",
	"hyperfleet_history_store_up",
	"hyperfleet_history_sealed_records_total",
	"hyperfleet_history_dropped_records_total",
	"hyperfleet_runnerpool_replicas",
	"hyperfleet_runnerpool_queued_jobs",
	"hyperfleet_vmpool_replicas",
	"hyperfleet_vmpool_cpu_utilisation_ratio",
	"hyperfleet_vmpool_memory_utilisation_ratio",
	"hyperfleet_bootstrap_attestations_total",
	"hyperfleet_github_rate_limit_remaining",
	"hyperfleet_platform_rate_limited_total",
	"hyperfleet_hypervisor_queue_depth",
	"hyperfleet_hypervisor_queue_wait_seconds",
	"hyperfleet_hypervisor_in_flight",
}

func TestEveryContractMetricIsServedByTheManagerRegistry(t *testing.T) {
	g := NewWithT(t)
	ObserveProvisioning("fleet/pve-a", 42*time.Second)
	ProvisioningResult("fleet/pve-a", "", true)
	ObserveProviderCall(ProviderProxmox, "Clone", "", 30*time.Millisecond)
	ObserveProviderCall(ProviderProxmox, "Clone", "Busy", 30*time.Millisecond)
	ObserveTask(ProviderProxmox, "Clone", 3*time.Second)
	WebhookDelivery(WebhookAccepted)
	ObserveJobPickup(70 * time.Second)
	ObservePickup("github", PickupWarm, 9*time.Second)
	SetPool("ci", "linux", 3, 2, 2, 1, 1, 4)
	SetPoolWarm("ci", "linux", 2)
	cpu, mem := 0.5, 0.25
	SetVMPool("web", "frontend", VMPoolCounts{Desired: 3, Current: 3}, &cpu, &mem)
	Attestation(AttestationSuccess)
	SetGitHubRateLimit(4999)
	PlatformRateLimit("gitlab")
	SetQueue("fleet/pve-a", map[string]int{"clone": 3, "delete": 0, "capacity": 2}, map[string]int{"clone": 2, "delete": 1})
	ObserveQueueWait("fleet/pve-a", "clone", 4*time.Second)
	HistoryWrites.WithLabelValues("ok").Inc()

	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	served := map[string]bool{}
	for _, f := range families {
		served[f.GetName()] = true
	}
	for _, name := range contract {
		g.Expect(served).To(HaveKey(name))
	}
	g.Expect(Collectors()).To(HaveLen(len(contract)))
	for _, c := range Collectors() {
		problems, err := testutil.CollectAndLint(c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(problems).To(BeEmpty(), "Prometheus naming conventions")
	}
}

func TestProvisioningResult(t *testing.T) {
	g := NewWithT(t)
	VMProvisioningTotal.Reset()
	ProvisioningResult("fleet/pve-a", "Provisioned", true)
	ProvisioningResult("fleet/pve-a", "TemplateNotFound", false)
	ProvisioningResult("fleet/pve-a", "TemplateNotFound", false)

	g.Expect(testutil.ToFloat64(VMProvisioningTotal.WithLabelValues("fleet/pve-a", "success", ""))).To(Equal(1.0),
		"a success carries no reason, so successes are one series")
	g.Expect(testutil.ToFloat64(VMProvisioningTotal.WithLabelValues("fleet/pve-a", "failure", "TemplateNotFound"))).To(Equal(2.0))
	g.Expect(testutil.CollectAndCount(VMProvisioningTotal)).To(Equal(2))
}

func TestProviderCallCodesAndErrors(t *testing.T) {
	g := NewWithT(t)
	HypervisorAPIRequestDuration.Reset()
	HypervisorAPIErrors.Reset()
	ObserveProviderCall(ProviderProxmox, "Start", "", time.Millisecond)
	ObserveProviderCall(ProviderProxmox, "Start", "Transient", time.Millisecond)

	g.Expect(testutil.CollectAndCount(HypervisorAPIRequestDuration)).To(Equal(2), "codes ok and Transient")
	g.Expect(testutil.ToFloat64(HypervisorAPIErrors.WithLabelValues(ProviderProxmox, "Start", "Transient"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(HypervisorAPIErrors)).To(Equal(1), "successes are not errors")
}

// The Proxmox-named metrics keep counting Proxmox's calls for one release, and only Proxmox's: a
// second provider's calls must not show up on a Proxmox dashboard.
func TestDeprecatedProxmoxMetricsMirrorProxmoxOnly(t *testing.T) {
	tests := []struct {
		provider string
		mirrored int
	}{
		{ProviderProxmox, 1},
		{"hyperv", 0},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			g := NewWithT(t)
			for _, c := range []interface{ Reset() }{
				HypervisorAPIRequestDuration, HypervisorAPIErrors, HypervisorTaskDuration,
				DeprecatedProxmoxAPIRequestDuration, DeprecatedProxmoxAPIErrors, DeprecatedProxmoxTaskDuration,
			} {
				c.Reset()
			}
			ObserveProviderCall(tt.provider, "Clone", "Busy", time.Millisecond)
			ObserveTask(tt.provider, "Clone", time.Second)

			g.Expect(testutil.ToFloat64(HypervisorAPIErrors.WithLabelValues(tt.provider, "Clone", "Busy"))).To(Equal(1.0))
			g.Expect(testutil.CollectAndCount(HypervisorAPIRequestDuration)).To(Equal(1))
			g.Expect(testutil.CollectAndCount(HypervisorTaskDuration)).To(Equal(1))
			g.Expect(testutil.CollectAndCount(DeprecatedProxmoxAPIRequestDuration)).To(Equal(tt.mirrored))
			g.Expect(testutil.CollectAndCount(DeprecatedProxmoxAPIErrors)).To(Equal(tt.mirrored))
			g.Expect(testutil.CollectAndCount(DeprecatedProxmoxTaskDuration)).To(Equal(tt.mirrored))
			if tt.mirrored > 0 {
				g.Expect(testutil.ToFloat64(DeprecatedProxmoxAPIErrors.WithLabelValues("Clone", "Busy"))).To(Equal(1.0))
			}
		})
	}
}

func TestPoolGaugesAndDeletion(t *testing.T) {
	g := NewWithT(t)
	RunnerPoolReplicas.Reset()
	RunnerPoolQueuedJobs.Reset()
	SetPool("ci", "linux", 5, 4, 3, 1, 2, 7)
	SetPoolWarm("ci", "linux", 1)
	SetPool("ci", "arm", 1, 1, 1, 1, 0, 0)

	for state, want := range map[string]float64{"desired": 5, "current": 4, "ready": 3, "idle": 1, "busy": 2, "warm": 1} {
		g.Expect(testutil.ToFloat64(RunnerPoolReplicas.WithLabelValues("ci", "linux", state))).To(Equal(want), state)
	}
	g.Expect(testutil.ToFloat64(RunnerPoolQueuedJobs.WithLabelValues("ci", "linux"))).To(Equal(7.0))

	DeletePool("ci", "linux")
	g.Expect(testutil.CollectAndCount(RunnerPoolReplicas)).To(Equal(5), "only the arm pool's series remain")
	g.Expect(testutil.CollectAndCount(RunnerPoolQueuedJobs)).To(Equal(1))
}

func TestVMPoolGaugesAndDeletion(t *testing.T) {
	g := NewWithT(t)
	VMPoolReplicas.Reset()
	VMPoolCPUUtilisation.Reset()
	VMPoolMemoryUtilisation.Reset()
	cpu, mem := 0.75, 0.5
	SetVMPool("web", "frontend", VMPoolCounts{Desired: 4, Current: 5, Ready: 4, Available: 3, Updated: 2, Unavailable: 1}, &cpu, &mem)
	SetVMPool("web", "cache", VMPoolCounts{Desired: 1, Current: 1}, nil, nil)
	for state, want := range map[string]float64{"desired": 4, "current": 5, "ready": 4, "available": 3, "updated": 2, "unavailable": 1} {
		g.Expect(testutil.ToFloat64(VMPoolReplicas.WithLabelValues("web", "frontend", state))).To(Equal(want), state)
	}
	g.Expect(testutil.ToFloat64(VMPoolCPUUtilisation.WithLabelValues("web", "frontend"))).To(Equal(0.75))
	g.Expect(testutil.ToFloat64(VMPoolMemoryUtilisation.WithLabelValues("web", "frontend"))).To(Equal(0.5))
	g.Expect(testutil.CollectAndCount(VMPoolCPUUtilisation)).To(Equal(1), "a pool without usage figures has no utilisation series")

	SetVMPool("web", "frontend", VMPoolCounts{Desired: 4}, nil, &mem)
	g.Expect(testutil.CollectAndCount(VMPoolCPUUtilisation)).To(BeZero(), "a figure that stops being reported is removed, not left stale")

	DeleteVMPool("web", "frontend")
	g.Expect(testutil.CollectAndCount(VMPoolReplicas)).To(Equal(6), "only the cache pool's series remain")
	g.Expect(testutil.CollectAndCount(VMPoolMemoryUtilisation)).To(BeZero())
}

func TestResultsOutsideTheContractAreBounded(t *testing.T) {
	g := NewWithT(t)
	WebhookDeliveries.Reset()
	BootstrapAttestations.Reset()
	WebhookDelivery(WebhookDuplicate)
	WebhookDelivery("delivery 8f3c… failed")
	Attestation(AttestationTokenReused)
	Attestation("some new failure")

	g.Expect(testutil.ToFloat64(WebhookDeliveries.WithLabelValues(WebhookDuplicate))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(WebhookDeliveries.WithLabelValues(Other))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(BootstrapAttestations.WithLabelValues(AttestationTokenReused))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(BootstrapAttestations.WithLabelValues(Other))).To(Equal(1.0))
}

func TestSimpleGaugesAndHistograms(t *testing.T) {
	g := NewWithT(t)
	SetGitHubRateLimit(12)
	g.Expect(testutil.ToFloat64(GitHubRateLimitRemaining)).To(Equal(12.0))

	HypervisorTaskDuration.Reset()
	ObserveTask(ProviderProxmox, "Delete", 1500*time.Millisecond)
	g.Expect(testutil.CollectAndCount(HypervisorTaskDuration, "hyperfleet_hypervisor_task_duration_seconds")).To(Equal(1))
}

func TestObservePickupBoundsItsLabels(t *testing.T) {
	g := NewWithT(t)
	JobPickupSeconds.Reset()
	ObservePickup("github", PickupHot, 300*time.Millisecond)
	ObservePickup("github", "lukewarm", time.Second)
	ObservePickup("jenkins", PickupCold, time.Second)
	g.Expect(testutil.CollectAndCount(JobPickupSeconds)).To(Equal(3))
	g.Expect(testutil.CollectAndCount(JobPickupSeconds.WithLabelValues("github", Other).(prometheus.Histogram))).To(Equal(1))
	g.Expect(testutil.CollectAndCount(JobPickupSeconds.WithLabelValues(Other, PickupCold).(prometheus.Histogram))).To(Equal(1))
}
