package tracing

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

func TestParseResourceAttributes(t *testing.T) {
	tests := []struct {
		in      string
		want    []attribute.KeyValue
		wantErr bool
	}{
		{in: ""},
		{in: "k8s.namespace.name=hyperfleet-system,k8s.pod.name=manager-0", want: []attribute.KeyValue{
			attribute.String("k8s.namespace.name", "hyperfleet-system"), attribute.String("k8s.pod.name", "manager-0")}},
		{in: " team = ci , ,env=lab%2Cdev", want: []attribute.KeyValue{
			attribute.String("team", "ci"), attribute.String("env", "lab,dev")}},
		{in: "empty=", want: []attribute.KeyValue{attribute.String("empty", "")}},
		{in: "novalue", wantErr: true},
		{in: "=orphan", wantErr: true},
		{in: "bad=%zz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseResourceAttributes(tt.in)
			if tt.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Endpoint: "grpc://collector:4317"},
		{Endpoint: "http://"},
		{Endpoint: "127.0.0.1:4317", ResourceAttributes: "nokey"},
	} {
		_, err := Setup(context.Background(), cfg)
		NewWithT(t).Expect(err).To(HaveOccurred(), "%+v", cfg)
	}
}

func TestSetupWithoutEndpointIsNoopButPropagates(t *testing.T) {
	g := NewWithT(t)
	shutdown, err := Setup(context.Background(), Config{ServiceName: "hyperfleet-operator"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shutdown(context.Background())).To(Succeed())

	_, span := otel.Tracer("test").Start(context.Background(), "nothing")
	g.Expect(span.IsRecording()).To(BeFalse())
	span.End()

	// An incoming trace context still flows through, so HyperFleet does not break a caller's trace.
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	header := http.Header{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(header))
	g.Expect(header.Get("traceparent")).To(Equal("00-01000000000000000000000000000000-0200000000000000-01"))
}

// TestSetupWithUnreachableCollector checks that neither Setup nor a bounded shutdown hang when the
// collector does not answer: the manager must start without its tracing backend.
func TestSetupWithUnreachableCollector(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	began := time.Now()
	shutdown, err := Setup(context.Background(), Config{Endpoint: endpoint, Insecure: true, ServiceName: "hyperfleet-test"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(began)).To(BeNumerically("<", time.Second))

	_, span := otel.Tracer("test").Start(context.Background(), "lost")
	g.Expect(span.IsRecording()).To(BeTrue())
	span.End()

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began = time.Now()
	err = shutdown(ctx)
	g.Expect(time.Since(began)).To(BeNumerically("<", 2*time.Second))
	t.Logf("shutdown with an unreachable collector: %v", err)
}

// TestSetupExportsToCollector runs a minimal OTLP gRPC collector and checks that spans arrive with
// the configured resource.
func TestSetupExportsToCollector(t *testing.T) {
	g := NewWithT(t)
	collector := startCollector(t)

	shutdown, err := Setup(context.Background(), Config{
		Endpoint:           "http://" + collector.addr,
		ServiceName:        "hyperfleet-test",
		ResourceAttributes: "service.name=overridden,k8s.namespace.name=hyperfleet-system,deployment.environment=ci%2Clab",
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, span := otel.Tracer("test").Start(context.Background(), "exported")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Expect(shutdown(ctx)).To(Succeed(), "shutdown flushes the batch")

	spans := collector.received()
	g.Expect(spans).To(HaveLen(1))
	g.Expect(spans[0].GetScopeSpans()[0].GetSpans()[0].GetName()).To(Equal("exported"))
	res := map[string]string{}
	for _, kv := range spans[0].GetResource().GetAttributes() {
		res[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	g.Expect(res).To(HaveKeyWithValue("service.name", "hyperfleet-test"))
	g.Expect(res).To(HaveKeyWithValue("k8s.namespace.name", "hyperfleet-system"))
	g.Expect(res).To(HaveKeyWithValue("deployment.environment", "ci,lab"))
	g.Expect(res).To(HaveKey("host.name"))
}

type fakeCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func startCollector(t *testing.T) *fakeCollector {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeCollector{addr: l.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return c
}

func (c *fakeCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, req.GetResourceSpans()...)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *fakeCollector) received() []*tracepb.ResourceSpans {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), c.spans...)
}
