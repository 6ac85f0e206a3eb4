package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/instrumented"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

var req = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "runners", Name: "linux-x64-abcde"}}

func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr
}

// logLines decodes the JSON lines pkg/logging wrote.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		lines = append(lines, m)
	}
	return lines
}

// loggerCtx is what controller-runtime hands a reconciler: a context carrying the logger.
func loggerCtx(t *testing.T, buf *bytes.Buffer) context.Context {
	t.Helper()
	log, err := logging.New("INFO", buf)
	if err != nil {
		t.Fatal(err)
	}
	return ctrl.LoggerInto(context.Background(), log.WithValues("controller", "machineclaim"))
}

// TestReconcileTraceCoversProviderCallsAndLogs reconciles against the Proxmox simulator and checks
// that the provider's span is a child of the reconcile span and that every log line of the
// reconcile, errors included, carries the reconcile span's IDs.
func TestReconcileTraceCoversProviderCallsAndLogs(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	pve, err := proxmox.New(proxmox.Config{Endpoint: sim.URL(), TokenID: pvesim.TestTokenID, TokenSecret: pvesim.TestTokenSecret,
		CABundle: sim.CACertPEM(), Cluster: "fleet/pve-a", InstallationID: "0123456789abcdef", Timeout: 5 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(pve.Close)
	provider := instrumented.Wrap(pve, "proxmox", "fleet/pve-a")

	var buf bytes.Buffer
	r := Reconciler("machineclaim", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		log := ctrl.LoggerFrom(ctx)
		version, err := provider.Verify(ctx)
		if err != nil {
			return reconcile.Result{}, err
		}
		log.Info("hypervisor verified", "version", version)
		_, err = provider.VM(ctx, hypervisor.VMRef{Node: "pve1", ID: idOf(999_999)})
		log.Error(err, "VM lookup failed")
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}))
	ctx, cancel := context.WithTimeout(loggerCtx(t, &buf), 30*time.Second)
	defer cancel()
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())

	var reconcileSpan sdktrace.ReadOnlySpan
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if s.Name() == "reconcile.machineclaim" {
			reconcileSpan = s
		} else {
			children[s.Name()] = s
		}
	}
	g.Expect(reconcileSpan).NotTo(BeNil())
	g.Expect(children).To(HaveKey("hypervisor.Verify"))
	g.Expect(children).To(HaveKey("hypervisor.VM"))
	for _, child := range children {
		g.Expect(child.SpanContext().TraceID()).To(Equal(reconcileSpan.SpanContext().TraceID()))
		g.Expect(child.Parent().SpanID()).To(Equal(reconcileSpan.SpanContext().SpanID()))
	}
	g.Expect(reconcileSpan.Attributes()).To(ContainElements(
		AttrNamespace.String("runners"), AttrName.String("linux-x64-abcde"), AttrResult.String("requeue_after")))

	lines := logLines(t, &buf)
	g.Expect(lines).To(HaveLen(2))
	g.Expect(lines[1]).To(HaveKeyWithValue("level", "error"))
	for _, line := range lines {
		g.Expect(line).To(HaveKeyWithValue(LogKeyTraceID, reconcileSpan.SpanContext().TraceID().String()))
		g.Expect(line).To(HaveKeyWithValue(LogKeySpanID, reconcileSpan.SpanContext().SpanID().String()))
		g.Expect(line).To(HaveKeyWithValue("controller", "machineclaim"), "the controller's logger is kept")
	}
}

func TestReconcileOutcomesOnTheSpan(t *testing.T) {
	busy := hypervisor.Errorf(hypervisor.ErrBusy, "clone", "VM 9000 is locked")
	terminal := reconcile.TerminalError(errors.New("template not found"))
	tests := []struct {
		name   string
		res    reconcile.Result
		err    error
		result string
		attrs  []attribute.KeyValue
	}{
		{name: "success", result: "success"},
		{name: "requeue after", res: reconcile.Result{RequeueAfter: time.Minute}, result: "requeue_after"},
		//lint:ignore SA1019 a reconciler may still return the deprecated Requeue
		{name: "requeue", res: reconcile.Result{Requeue: true}, result: "requeue"},
		{name: "hypervisor error", err: busy, result: "error", attrs: []attribute.KeyValue{AttrErrorType.String("Busy")}},
		{name: "terminal error", err: terminal, result: "error",
			attrs: []attribute.KeyValue{AttrTerminal.Bool(true), AttrErrorType.String("Error")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sr := recordSpans(t)
			r := Reconciler("runnerpool", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				return tt.res, tt.err
			}))
			res, err := r.Reconcile(context.Background(), req)
			g.Expect(res).To(Equal(tt.res))
			if tt.err != nil {
				g.Expect(err).To(BeIdenticalTo(tt.err), "errors pass through for controller-runtime's backoff")
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			spans := sr.Ended()
			g.Expect(spans).To(HaveLen(1))
			g.Expect(spans[0].Name()).To(Equal("reconcile.runnerpool"))
			g.Expect(spans[0].Attributes()).To(ContainElement(AttrResult.String(tt.result)))
			g.Expect(spans[0].Attributes()).To(ContainElements(tt.attrs))
			if tt.err != nil {
				g.Expect(spans[0].Status().Code).To(Equal(codes.Error))
				g.Expect(spans[0].Events()).To(ContainElement(HaveField("Name", "exception")))
			} else {
				g.Expect(spans[0].Status().Code).To(Equal(codes.Unset))
			}
		})
	}
}

func TestLogsCarryNoTraceWithoutASpan(t *testing.T) {
	g := NewWithT(t)
	_, err := Setup(context.Background(), Config{})
	g.Expect(err).NotTo(HaveOccurred())

	var buf bytes.Buffer
	r := Reconciler("machineclaim", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		ctrl.LoggerFrom(ctx).Info("tracing is off")
		return reconcile.Result{}, nil
	}))
	_, err = r.Reconcile(loggerCtx(t, &buf), req)
	g.Expect(err).NotTo(HaveOccurred())

	var direct bytes.Buffer
	log, err := logging.New("INFO", &direct)
	g.Expect(err).NotTo(HaveOccurred())
	LoggerWithTrace(context.Background(), log).Error(errors.New("boom"), "no span here")

	for _, line := range append(logLines(t, &buf), logLines(t, &direct)...) {
		g.Expect(line).NotTo(HaveKey(LogKeyTraceID))
		g.Expect(line).NotTo(HaveKey(LogKeySpanID))
	}
}

func TestLoggerWithTraceOnAnyLevel(t *testing.T) {
	g := NewWithT(t)
	recordSpans(t)
	ctx, span := otel.Tracer("test").Start(context.Background(), "webhook")
	defer span.End()
	var buf bytes.Buffer
	base, err := logging.New("DEBUG", &buf)
	g.Expect(err).NotTo(HaveOccurred())
	log := LoggerWithTrace(ctx, base)
	log.V(1).Info("debug line")
	log.Info("info line")
	log.Error(errors.New("boom"), "error line")

	lines := logLines(t, &buf)
	g.Expect(lines).To(HaveLen(3))
	for _, line := range lines {
		g.Expect(line).To(HaveKeyWithValue(LogKeyTraceID, span.SpanContext().TraceID().String()))
		g.Expect(line).To(HaveKeyWithValue(LogKeySpanID, span.SpanContext().SpanID().String()))
	}
}
