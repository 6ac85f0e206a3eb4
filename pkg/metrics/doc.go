// Package metrics defines HyperFleet's Prometheus metrics and the small helpers that record them.
// The collectors are registered on controller-runtime's registry, so the manager's (secure) metrics
// endpoint serves them without further wiring; docs/metrics.md is the contract for names and labels.
package metrics
