package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Span attribute keys of reconcile spans.
const (
	AttrController = attribute.Key("hyperfleet.controller")
	AttrNamespace  = attribute.Key("hyperfleet.object.namespace")
	AttrName       = attribute.Key("hyperfleet.object.name")
	// AttrResult is success, requeue, requeue_after or error, as in controller-runtime's
	// controller_runtime_reconcile_total.
	AttrResult = attribute.Key("hyperfleet.reconcile.result")
	// AttrTerminal marks errors wrapped in reconcile.TerminalError, which are not retried.
	AttrTerminal  = attribute.Key("hyperfleet.reconcile.terminal")
	AttrErrorType = attribute.Key("error.type")
)

// Reconciler wraps r so that each reconcile runs in a span named "reconcile.<name>" and its logger
// (ctrl.LoggerFrom) carries the span's trace_id and span_id. Hypervisor calls made with that
// context become child spans, so one trace shows a reconcile with every Proxmox call it made.
func Reconciler(name string, r reconcile.Reconciler) reconcile.Reconciler {
	return &tracedReconciler{name: name, next: r, tracer: otel.Tracer(ScopeName)}
}

type tracedReconciler struct {
	name   string
	next   reconcile.Reconciler
	tracer trace.Tracer
}

func (t *tracedReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	ctx, span := t.tracer.Start(ctx, "reconcile."+t.name, trace.WithAttributes(
		AttrController.String(t.name), AttrNamespace.String(req.Namespace), AttrName.String(req.Name)))
	defer span.End()
	ctx = ctrl.LoggerInto(ctx, LoggerWithTrace(ctx, ctrl.LoggerFrom(ctx)))

	res, err = t.next.Reconcile(ctx, req)

	switch {
	case err != nil:
		span.SetAttributes(AttrResult.String("error"), AttrErrorType.String(hypervisor.Reason(err)))
		if errors.Is(err, reconcile.TerminalError(nil)) {
			span.SetAttributes(AttrTerminal.Bool(true))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case res.RequeueAfter > 0:
		span.SetAttributes(AttrResult.String("requeue_after"))
	//lint:ignore SA1019 deprecated but still honoured by controller-runtime: a reconciler may return it
	case res.Requeue:
		span.SetAttributes(AttrResult.String("requeue"))
	default:
		span.SetAttributes(AttrResult.String("success"))
	}
	return res, err
}
