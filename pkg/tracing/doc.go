// Package tracing sets up OpenTelemetry for HyperFleet's processes (an OTLP gRPC exporter when an
// endpoint is configured, W3C trace context propagation) and ties logs to traces: loggers carry the
// trace_id and span_id of the span in their context, and every reconcile runs in its own span.
package tracing
