package instrumented

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// recordSpans installs an in-memory span recorder as the global tracer provider. Wrap picks the
// tracer up from the global provider, so wrap after calling this.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr
}

func resetMetrics() {
	metrics.HypervisorAPIRequestDuration.Reset()
	metrics.HypervisorAPIErrors.Reset()
	metrics.HypervisorTaskDuration.Reset()
	metrics.DeprecatedProxmoxAPIRequestDuration.Reset()
	metrics.DeprecatedProxmoxAPIErrors.Reset()
	metrics.DeprecatedProxmoxTaskDuration.Reset()
}

// observations is the sample count of one histogram series.
func observations(vec *prometheus.HistogramVec, labels ...string) uint64 {
	m := &dto.Metric{}
	if err := vec.WithLabelValues(labels...).(prometheus.Metric).Write(m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func spansNamed(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// fakeProvider answers every call with err and remembers the span context it was called with.
// The Proxmox simulator covers real behaviour (sim_test.go); this fake only lets tests reach every
// method and inject errors and task states cheaply.
type fakeProvider struct {
	err     error
	done    bool
	taskErr error
	seen    trace.SpanContext
}

func (f *fakeProvider) saw(ctx context.Context) error {
	f.seen = trace.SpanContextFromContext(ctx)
	return f.err
}

func (f *fakeProvider) task(ctx context.Context, op string) (hypervisor.TaskID, error) {
	if err := f.saw(ctx); err != nil {
		return "", err
	}
	return hypervisor.TaskID("task-" + op), nil
}

func (f *fakeProvider) Verify(ctx context.Context) (string, error) { return "9.1.3", f.saw(ctx) }
func (f *fakeProvider) Nodes(ctx context.Context) ([]hypervisor.Node, error) {
	return nil, f.saw(ctx)
}
func (f *fakeProvider) ResolveTemplate(ctx context.Context, _ hypervisor.TemplateSelector) (hypervisor.Template, error) {
	return hypervisor.Template{Ref: hypervisor.VMRef{Node: "pve1", ID: "9000"}}, f.saw(ctx)
}
func (f *fakeProvider) ResolveTemplates(ctx context.Context, _ hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	return []hypervisor.Template{{Ref: hypervisor.VMRef{Node: "pve1", ID: "9000"}}, {Ref: hypervisor.VMRef{Node: "pve2", ID: "9100"}}}, f.saw(ctx)
}
func (f *fakeProvider) NextID(ctx context.Context, _ int) (int, error) { return 105, f.saw(ctx) }
func (f *fakeProvider) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{PreallocatedIDs: true, AsyncTasks: true}
}
func (f *fakeProvider) Clone(ctx context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	id, err := f.task(ctx, "clone")
	return spec.Target, id, err
}
func (f *fakeProvider) Configure(ctx context.Context, _ hypervisor.VMRef, _ hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	return "", f.saw(ctx)
}
func (f *fakeProvider) Start(ctx context.Context, _ hypervisor.VMRef) (hypervisor.TaskID, error) {
	return f.task(ctx, "start")
}
func (f *fakeProvider) Stop(ctx context.Context, _ hypervisor.VMRef) (hypervisor.TaskID, error) {
	return f.task(ctx, "stop")
}
func (f *fakeProvider) Shutdown(ctx context.Context, _ hypervisor.VMRef) (hypervisor.TaskID, error) {
	return f.task(ctx, "shutdown")
}
func (f *fakeProvider) Delete(ctx context.Context, _ hypervisor.VMRef) (hypervisor.TaskID, error) {
	return f.task(ctx, "delete")
}
func (f *fakeProvider) StopSeen(ctx context.Context, _ hypervisor.VM) (hypervisor.TaskID, error) {
	return f.task(ctx, "stop")
}
func (f *fakeProvider) DeleteSeen(ctx context.Context, _ hypervisor.VM) (hypervisor.TaskID, error) {
	return f.task(ctx, "delete")
}
func (f *fakeProvider) VM(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	return hypervisor.VM{Ref: ref}, f.saw(ctx)
}
func (f *fakeProvider) Addresses(ctx context.Context, _ hypervisor.VMRef) ([]hypervisor.Address, error) {
	return nil, f.saw(ctx)
}
func (f *fakeProvider) OwnedVMs(ctx context.Context) ([]hypervisor.VM, error) { return nil, f.saw(ctx) }
func (f *fakeProvider) EjectCloudInit(ctx context.Context, _ hypervisor.VMRef) error {
	return f.saw(ctx)
}
func (f *fakeProvider) Adopt(ctx context.Context, _ hypervisor.VMRef, _ hypervisor.Ownership, _ string) error {
	return f.saw(ctx)
}
func (f *fakeProvider) TaskStatus(ctx context.Context, _ string, _ hypervisor.TaskID) (hypervisor.TaskState, error) {
	return hypervisor.TaskState{Done: f.done, Err: f.taskErr}, f.saw(ctx)
}

// closingFake has a Close method, like the Proxmox provider.
type closingFake struct {
	fakeProvider
	closed bool
}

func (c *closingFake) Close() { c.closed = true }
