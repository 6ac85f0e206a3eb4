package instrumented

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/instrumented"

// Span attribute keys. error.type follows the OpenTelemetry semantic conventions; the others are
// HyperFleet's own and therefore namespaced.
const (
	AttrCluster    = attribute.Key("hyperfleet.hypervisor.cluster")
	AttrProvider   = attribute.Key("hyperfleet.hypervisor.provider")
	AttrVMNode     = attribute.Key("hyperfleet.vm.node")
	AttrVMID       = attribute.Key("hyperfleet.vm.id")
	AttrTemplateID = attribute.Key("hyperfleet.vm.template_id")
	AttrTaskID     = attribute.Key("hyperfleet.task.id")
	AttrTaskDone   = attribute.Key("hyperfleet.task.done")
	// AttrTaskError is the class of a finished task's failure; the TaskStatus call itself succeeded.
	AttrTaskError = attribute.Key("hyperfleet.task.error_class")
	AttrErrorType = attribute.Key("error.type")
)

// Wrap returns p with a span, a duration observation and, on failure, an error count for every
// call; provider is the metrics' provider label (e.g. metrics.ProviderProxmox) and cluster the
// HypervisorCluster's namespace/name. Errors are returned unchanged, so errors.Is on hypervisor's classes keeps working. The
// result has a Close method exactly when p has one, because hypervisor.Cache closes replaced
// providers through it.
func Wrap(p hypervisor.Provider, providerName, cluster string) hypervisor.Provider {
	w := &provider{next: p, name: providerName, cluster: cluster, tracer: otel.Tracer(ScopeName)}
	if _, ok := p.(interface{ Close() }); ok {
		return &closingProvider{w}
	}
	return w
}

type provider struct {
	next    hypervisor.Provider
	name    string
	cluster string
	tracer  trace.Tracer
}

type closingProvider struct{ *provider }

// Close closes the wrapped provider.
func (c *closingProvider) Close() { c.next.(interface{ Close() }).Close() }

// Unwrap implements hypervisor.Unwrapper: hypervisor.As asks the wrapped provider which optional
// interfaces it really has, and callers that need its concrete type reach it.
func (p *provider) Unwrap() hypervisor.Provider { return p.next }

// call is one instrumented provider call.
type call struct {
	p     *provider
	op    string
	span  trace.Span
	start time.Time
}

func (p *provider) begin(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, *call) {
	attrs = append(attrs, AttrCluster.String(p.cluster), AttrProvider.String(p.name))
	ctx, span := p.tracer.Start(ctx, "hypervisor."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &call{p: p, op: op, span: span, start: time.Now()}
}

func (c *call) end(err error, attrs ...attribute.KeyValue) {
	reason := ""
	if err != nil {
		reason = hypervisor.Reason(err)
		attrs = append(attrs, AttrErrorType.String(reason))
		c.span.RecordError(err)
		c.span.SetStatus(codes.Error, err.Error())
	}
	metrics.ObserveProviderCall(c.p.name, c.op, reason, time.Since(c.start))
	c.span.SetAttributes(attrs...)
	c.span.End()
}

// startedTask ends a call that may have started a task and remembers when, for the task duration.
func (p *provider) startedTask(c *call, id hypervisor.TaskID, err error) {
	var attrs []attribute.KeyValue
	if id != "" {
		attrs = append(attrs, AttrTaskID.String(string(id)))
		if err == nil {
			tasks.add(p.taskKey(id), c.op, time.Now())
		}
	}
	c.end(err, attrs...)
}

func (p *provider) taskKey(id hypervisor.TaskID) string { return p.cluster + "\x00" + string(id) }

func refAttrs(ref hypervisor.VMRef) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if ref.Node != "" {
		attrs = append(attrs, AttrVMNode.String(ref.Node))
	}
	if !ref.IsZero() {
		attrs = append(attrs, AttrVMID.String(ref.ID))
	}
	return attrs
}

// Capabilities is the wrapped provider's; it costs no call, so it is not instrumented.
func (p *provider) Capabilities() hypervisor.Capabilities { return p.next.Capabilities() }

func (p *provider) Verify(ctx context.Context) (string, error) {
	ctx, c := p.begin(ctx, "Verify")
	version, err := p.next.Verify(ctx)
	c.end(err)
	return version, err
}

func (p *provider) Nodes(ctx context.Context) ([]hypervisor.Node, error) {
	ctx, c := p.begin(ctx, "Nodes")
	nodes, err := p.next.Nodes(ctx)
	c.end(err)
	return nodes, err
}

func selectorAttrs(sel hypervisor.TemplateSelector) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if sel.ID != "" {
		attrs = append(attrs, AttrTemplateID.String(sel.ID))
	}
	if sel.Node != "" {
		attrs = append(attrs, AttrVMNode.String(sel.Node))
	}
	return attrs
}

func (p *provider) ResolveTemplate(ctx context.Context, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	ctx, c := p.begin(ctx, "ResolveTemplate", selectorAttrs(sel)...)
	tmpl, err := p.next.ResolveTemplate(ctx, sel)
	if err == nil {
		c.span.SetAttributes(AttrTemplateID.String(tmpl.Ref.ID), AttrVMNode.String(tmpl.Ref.Node))
	}
	c.end(err)
	return tmpl, err
}

func (p *provider) ResolveTemplates(ctx context.Context, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	ctx, c := p.begin(ctx, "ResolveTemplates", selectorAttrs(sel)...)
	templates, err := p.next.ResolveTemplates(ctx, sel)
	c.end(err)
	return templates, err
}

func (p *provider) NextID(ctx context.Context, min int) (int, error) {
	ctx, c := p.begin(ctx, "NextID")
	id, err := p.next.NextID(ctx, min)
	if err == nil {
		c.span.SetAttributes(AttrVMID.String(strconv.Itoa(id)))
	}
	c.end(err)
	return id, err
}

func (p *provider) Clone(ctx context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	attrs := append(refAttrs(spec.Target), AttrTemplateID.String(spec.Source.ID))
	ctx, c := p.begin(ctx, "Clone", attrs...)
	ref, id, err := p.next.Clone(ctx, spec)
	if err == nil && ref != spec.Target {
		// The provider assigned the ID (or the node): record the VM it made.
		c.span.SetAttributes(refAttrs(ref)...)
	}
	p.startedTask(c, id, err)
	return ref, id, err
}

func (p *provider) Configure(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Configure", refAttrs(ref)...)
	id, err := p.next.Configure(ctx, ref, spec)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) Start(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Start", refAttrs(ref)...)
	id, err := p.next.Start(ctx, ref)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) Stop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Stop", refAttrs(ref)...)
	id, err := p.next.Stop(ctx, ref)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) Shutdown(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Shutdown", refAttrs(ref)...)
	id, err := p.next.Shutdown(ctx, ref)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) Delete(ctx context.Context, ref hypervisor.VMRef) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Delete", refAttrs(ref)...)
	id, err := p.next.Delete(ctx, ref)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) StopSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Stop", refAttrs(vm.Ref)...)
	id, err := p.next.StopSeen(ctx, vm)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) DeleteSeen(ctx context.Context, vm hypervisor.VM) (hypervisor.TaskID, error) {
	ctx, c := p.begin(ctx, "Delete", refAttrs(vm.Ref)...)
	id, err := p.next.DeleteSeen(ctx, vm)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) VM(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	ctx, c := p.begin(ctx, "VM", refAttrs(ref)...)
	vm, err := p.next.VM(ctx, ref)
	c.end(err)
	return vm, err
}

func (p *provider) Addresses(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Address, error) {
	ctx, c := p.begin(ctx, "Addresses", refAttrs(ref)...)
	addrs, err := p.next.Addresses(ctx, ref)
	c.end(err)
	return addrs, err
}

func (p *provider) OwnedVMs(ctx context.Context) ([]hypervisor.VM, error) {
	ctx, c := p.begin(ctx, "OwnedVMs")
	vms, err := p.next.OwnedVMs(ctx)
	c.end(err)
	return vms, err
}

func (p *provider) EjectCloudInit(ctx context.Context, ref hypervisor.VMRef) error {
	ctx, c := p.begin(ctx, "EjectCloudInit", refAttrs(ref)...)
	err := p.next.EjectCloudInit(ctx, ref)
	c.end(err)
	return err
}

func (p *provider) Adopt(ctx context.Context, ref hypervisor.VMRef, owner hypervisor.Ownership, legacyClaimUID string) error {
	ctx, c := p.begin(ctx, "Adopt", refAttrs(ref)...)
	err := p.next.Adopt(ctx, ref, owner, legacyClaimUID)
	c.end(err)
	return err
}

// TaskStatus also records the task's duration when it is seen done and its start is known.
func (p *provider) TaskStatus(ctx context.Context, node string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	attrs := []attribute.KeyValue{AttrTaskID.String(string(id))}
	if node != "" {
		attrs = append(attrs, AttrVMNode.String(node))
	}
	ctx, c := p.begin(ctx, "TaskStatus", attrs...)
	st, err := p.next.TaskStatus(ctx, node, id)
	switch {
	case err == nil && st.Done:
		if op, started, ok := tasks.finish(p.taskKey(id)); ok {
			metrics.ObserveTask(p.name, op, time.Since(started))
		}
		attrs = []attribute.KeyValue{AttrTaskDone.Bool(true)}
		if st.Err != nil {
			attrs = append(attrs, AttrTaskError.String(hypervisor.Reason(st.Err)))
		}
		c.end(nil, attrs...)
	case err == nil:
		c.end(nil, AttrTaskDone.Bool(false))
	default:
		if errors.Is(err, hypervisor.ErrNotFound) {
			tasks.forget(p.taskKey(id))
		}
		c.end(err)
	}
	return st, err
}
