package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/hyperfleet-io/hyperfleet/pkg/tracing"

// Config selects where traces go and how the process is described in them.
type Config struct {
	// Endpoint is the OTLP gRPC collector: a URL (http://collector:4317 is plaintext, https://
	// uses TLS) or host:port (TLS unless Insecure). Empty disables tracing.
	Endpoint string
	// ServiceName is the service.name resource attribute; it wins over a service.name given in
	// ResourceAttributes, as OTEL_SERVICE_NAME does over OTEL_RESOURCE_ATTRIBUTES.
	ServiceName string
	// ResourceAttributes are extra resource attributes in OTEL_RESOURCE_ATTRIBUTES format:
	// key=value pairs separated by commas, values percent-encoded where needed.
	ResourceAttributes string
	// Insecure sends traces in plaintext to a host:port Endpoint.
	Insecure bool
}

// Setup installs the global TracerProvider and the W3C trace context and baggage propagators.
// Without an Endpoint the provider is a no-op: spans cost nearly nothing and loggers carry no trace
// IDs. The exporter connects lazily, so Setup never blocks on an unreachable collector; export
// failures are logged through the logger in ctx. Call shutdown before exiting to flush spans.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if cfg.Endpoint == "" {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts, err := exporterOptions(cfg)
	if err != nil {
		return nil, err
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	log := ctrl.LoggerFrom(ctx).WithName("otel")
	otel.SetLogger(log)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Error(err, "OpenTelemetry error") }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func exporterOptions(cfg Config) ([]otlptracegrpc.Option, error) {
	if !strings.Contains(cfg.Endpoint, "://") {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint)}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return opts, nil
	}
	// The exporter silently falls back to localhost on a URL it cannot parse: refuse it instead.
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("tracing: endpoint %q is not an http(s) URL or host:port", cfg.Endpoint)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(cfg.Endpoint)}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return opts, nil
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs, err := ParseResourceAttributes(cfg.ResourceAttributes)
	if err != nil {
		return nil, err
	}
	if cfg.ServiceName != "" {
		attrs = append(attrs, attribute.String("service.name", cfg.ServiceName))
	}
	// Later options win, so service.name from ServiceName overrides the attribute list.
	return resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithAttributes(attrs...))
}

// ParseResourceAttributes parses OTEL_RESOURCE_ATTRIBUTES: "k=v,k=v" with percent-encoded values.
func ParseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	var attrs []attribute.KeyValue
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("tracing: resource attribute %q is not key=value", pair)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("tracing: resource attribute %q: %w", k, err)
		}
		attrs = append(attrs, attribute.String(k, value))
	}
	return attrs, nil
}
