package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Queue metrics: the clones and deletes waiting for a slot of their hypervisor cluster, the ones
// holding a slot, and the claims waiting for memory.
var (
	HypervisorQueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_hypervisor_queue_depth",
		Help: "MachineClaims waiting in a hypervisor cluster's queue, by operation (clone, delete: for a slot; capacity: for memory).",
	}, []string{"cluster", "operation"})

	HypervisorQueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperfleet_hypervisor_queue_wait_seconds",
		Help:    "Time a MachineClaim waited in a hypervisor cluster's queue before it got a slot (clone, delete) or a try at placement (capacity).",
		Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200},
	}, []string{"cluster", "operation"})

	HypervisorInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperfleet_hypervisor_in_flight",
		Help: "Clones and deletes holding a slot of a hypervisor cluster, by operation.",
	}, []string{"cluster", "operation"})
)

var queueOperations = set("clone", "delete", "capacity")

// SetQueue publishes a hypervisor cluster's queue: waiting and in-flight counts by operation.
func SetQueue(cluster string, waiting, inFlight map[string]int) {
	for op, n := range waiting {
		HypervisorQueueDepth.WithLabelValues(cluster, bounded(op, queueOperations)).Set(float64(n))
	}
	for op, n := range inFlight {
		HypervisorInFlight.WithLabelValues(cluster, bounded(op, queueOperations)).Set(float64(n))
	}
}

// ObserveQueueWait records how long a claim waited for its slot or its try.
func ObserveQueueWait(cluster, op string, d time.Duration) {
	HypervisorQueueWait.WithLabelValues(cluster, bounded(op, queueOperations)).Observe(d.Seconds())
}

// DeleteQueue removes a deleted hypervisor cluster's queue series.
func DeleteQueue(cluster string) {
	labels := prometheus.Labels{"cluster": cluster}
	HypervisorQueueDepth.DeletePartialMatch(labels)
	HypervisorQueueWait.DeletePartialMatch(labels)
	HypervisorInFlight.DeletePartialMatch(labels)
}
