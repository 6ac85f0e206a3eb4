// Package instrumented decorates a hypervisor.Provider with OpenTelemetry spans and HyperFleet's
// Proxmox API metrics, so controllers get tracing and metrics for every hypervisor call by wrapping
// the provider once where it is built, without touching the provider or the controllers.
package instrumented
