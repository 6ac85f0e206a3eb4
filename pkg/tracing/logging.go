package tracing

import (
	"context"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
)

// Log keys of the trace context, named as in the OpenTelemetry log data model so log backends can
// link lines to traces.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// LoggerWithTrace returns log with the trace and span IDs of the span in ctx, or log unchanged when
// ctx carries no valid span (tracing disabled, or no span started).
func LoggerWithTrace(ctx context.Context, log logr.Logger) logr.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return log
	}
	return log.WithValues(LogKeyTraceID, sc.TraceID().String(), LogKeySpanID, sc.SpanID().String())
}
