package instrumented

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

const cluster = "fleet/pve-a"

var ref = hypervisor.VMRef{Node: "pve2", ID: "105"}

func TestEveryCallIsTracedAndTimed(t *testing.T) {
	type invoke func(context.Context, hypervisor.Provider) error
	task := func(f func(context.Context, hypervisor.VMRef) (hypervisor.TaskID, error)) error {
		_, err := f(context.Background(), ref)
		return err
	}
	vmAttrs := map[attribute.Key]attribute.Value{AttrVMNode: attribute.StringValue("pve2"), AttrVMID: attribute.StringValue("105")}
	tests := []struct {
		op    string
		call  invoke
		attrs map[attribute.Key]attribute.Value
	}{
		{"Verify", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.Verify(ctx); return err }, nil},
		{"Nodes", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.Nodes(ctx); return err }, nil},
		{"ResolveTemplate", func(ctx context.Context, p hypervisor.Provider) error {
			_, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu"})
			return err
		}, map[attribute.Key]attribute.Value{AttrTemplateID: attribute.StringValue("9000"), AttrVMNode: attribute.StringValue("pve1")}},
		{"ResolveTemplates", func(ctx context.Context, p hypervisor.Provider) error {
			_, err := p.ResolveTemplates(ctx, hypervisor.TemplateSelector{Name: "ubuntu", Node: "pve2"})
			return err
		}, map[attribute.Key]attribute.Value{AttrVMNode: attribute.StringValue("pve2")}},
		{"NextID", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.NextID(ctx, 100); return err },
			map[attribute.Key]attribute.Value{AttrVMID: attribute.StringValue("105")}},
		{"Clone", func(ctx context.Context, p hypervisor.Provider) error {
			_, _, err := p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: "9000"}, Target: ref})
			return err
		}, map[attribute.Key]attribute.Value{AttrVMNode: attribute.StringValue("pve2"), AttrVMID: attribute.StringValue("105"),
			AttrTemplateID: attribute.StringValue("9000"), AttrTaskID: attribute.StringValue("task-clone")}},
		{"Configure", func(ctx context.Context, p hypervisor.Provider) error {
			_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2})
			return err
		}, vmAttrs},
		{"Start", func(ctx context.Context, p hypervisor.Provider) error { return task(p.Start) },
			map[attribute.Key]attribute.Value{AttrVMID: attribute.StringValue("105"), AttrTaskID: attribute.StringValue("task-start")}},
		{"Stop", func(ctx context.Context, p hypervisor.Provider) error { return task(p.Stop) }, vmAttrs},
		{"Shutdown", func(ctx context.Context, p hypervisor.Provider) error { return task(p.Shutdown) }, vmAttrs},
		{"Delete", func(ctx context.Context, p hypervisor.Provider) error { return task(p.Delete) }, vmAttrs},
		{"VM", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.VM(ctx, ref); return err }, vmAttrs},
		{"Addresses", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.Addresses(ctx, ref); return err }, vmAttrs},
		{"OwnedVMs", func(ctx context.Context, p hypervisor.Provider) error { _, err := p.OwnedVMs(ctx); return err }, nil},
		{"TaskStatus", func(ctx context.Context, p hypervisor.Provider) error {
			_, err := p.TaskStatus(ctx, "pve2", "task-x")
			return err
		}, map[attribute.Key]attribute.Value{AttrTaskID: attribute.StringValue("task-x"), AttrTaskDone: attribute.BoolValue(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			g := NewWithT(t)
			sr := recordSpans(t)
			resetMetrics()
			fake := &fakeProvider{}
			g.Expect(tt.call(context.Background(), Wrap(fake, metrics.ProviderProxmox, cluster))).To(Succeed())

			spans := sr.Ended()
			g.Expect(spans).To(HaveLen(1))
			s := spans[0]
			g.Expect(s.Name()).To(Equal("hypervisor." + tt.op))
			g.Expect(s.SpanKind()).To(Equal(trace.SpanKindClient))
			g.Expect(s.Status().Code).To(Equal(codes.Unset))
			g.Expect(fake.seen).To(Equal(s.SpanContext()), "the provider runs inside the span, so its own spans nest")
			attrs := attrsOf(s)
			g.Expect(attrs).To(HaveKeyWithValue(AttrCluster, attribute.StringValue(cluster)))
			g.Expect(attrs).To(HaveKeyWithValue(AttrProvider, attribute.StringValue(metrics.ProviderProxmox)))
			g.Expect(attrs).NotTo(HaveKey(AttrErrorType))
			for k, v := range tt.attrs {
				g.Expect(attrs).To(HaveKeyWithValue(k, v))
			}
			g.Expect(observations(metrics.HypervisorAPIRequestDuration, metrics.ProviderProxmox, tt.op, "ok")).To(Equal(uint64(1)))
			g.Expect(testutil.CollectAndCount(metrics.HypervisorAPIErrors)).To(BeZero())
		})
	}
}

func TestErrorsPassThroughUnchanged(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	resetMetrics()
	locked := hypervisor.Errorf(hypervisor.ErrBusy, "start", "VM 105 is locked (clone)")
	p := Wrap(&fakeProvider{err: locked}, metrics.ProviderProxmox, cluster)
	tracked := tasks.len()

	_, err := p.Start(context.Background(), ref)
	g.Expect(err).To(BeIdenticalTo(locked))
	g.Expect(errors.Is(err, hypervisor.ErrBusy)).To(BeTrue())
	g.Expect(hypervisor.IsRetryable(err)).To(BeTrue())

	s := spansNamed(sr, "hypervisor.Start")[0]
	g.Expect(s.Status().Code).To(Equal(codes.Error))
	g.Expect(s.Status().Description).To(ContainSubstring("VM 105 is locked"))
	g.Expect(attrsOf(s)).To(HaveKeyWithValue(AttrErrorType, attribute.StringValue("Busy")))
	g.Expect(attrsOf(s)).NotTo(HaveKey(AttrTaskID), "a failed start has no task")
	g.Expect(s.Events()).To(ContainElement(HaveField("Name", "exception")))

	g.Expect(testutil.ToFloat64(metrics.HypervisorAPIErrors.WithLabelValues(metrics.ProviderProxmox, "Start", "Busy"))).To(Equal(1.0))
	g.Expect(observations(metrics.HypervisorAPIRequestDuration, metrics.ProviderProxmox, "Start", "Busy")).To(Equal(uint64(1)))
	g.Expect(tasks.len()).To(Equal(tracked), "no task was started")
}

func TestTaskDurationIsRecordedOncePerTask(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	resetMetrics()
	fake := &fakeProvider{}
	p := Wrap(fake, metrics.ProviderProxmox, cluster)
	ctx := context.Background()

	_, id, err := p.Clone(ctx, hypervisor.CloneSpec{Target: ref})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.TaskStatus(ctx, "", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testutil.CollectAndCount(metrics.HypervisorTaskDuration)).To(BeZero(), "still running")

	fake.done, fake.taskErr = true, hypervisor.Errorf(hypervisor.ErrTaskFailed, "clone", "storage full")
	st, err := p.TaskStatus(ctx, "", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Err).To(BeIdenticalTo(fake.taskErr))
	g.Expect(observations(metrics.HypervisorTaskDuration, metrics.ProviderProxmox, "Clone")).To(Equal(uint64(1)), "failed tasks are timed too")

	_, err = p.TaskStatus(ctx, "", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(observations(metrics.HypervisorTaskDuration, metrics.ProviderProxmox, "Clone")).To(Equal(uint64(1)), "a task is timed once")

	_, err = p.TaskStatus(ctx, "", "UPID:pve1:started-by-another-replica")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testutil.CollectAndCount(metrics.HypervisorTaskDuration)).To(Equal(1), "unknown starts are not guessed")

	polls := spansNamed(sr, "hypervisor.TaskStatus")
	g.Expect(polls).To(HaveLen(4))
	g.Expect(attrsOf(polls[1])).To(HaveKeyWithValue(AttrTaskDone, attribute.BoolValue(true)))
	g.Expect(attrsOf(polls[1])).To(HaveKeyWithValue(AttrTaskError, attribute.StringValue("TaskFailed")))
	g.Expect(polls[1].Status().Code).To(Equal(codes.Unset), "polling a failed task is a successful call")
}

func TestTaskStartSurvivesProviderRebuild(t *testing.T) {
	g := NewWithT(t)
	resetMetrics()
	ctx := context.Background()
	id, err := Wrap(&fakeProvider{}, metrics.ProviderProxmox, cluster).Stop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())

	rebuilt := Wrap(&fakeProvider{done: true}, metrics.ProviderProxmox, cluster)
	_, err = rebuilt.TaskStatus(ctx, "", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(observations(metrics.HypervisorTaskDuration, metrics.ProviderProxmox, "Stop")).To(Equal(uint64(1)))

	id, err = Wrap(&fakeProvider{}, metrics.ProviderProxmox, cluster).Stop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Wrap(&fakeProvider{done: true}, metrics.ProviderProxmox, "fleet/other").TaskStatus(ctx, "", id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(observations(metrics.HypervisorTaskDuration, metrics.ProviderProxmox, "Stop")).To(Equal(uint64(1)), "task IDs are per cluster")
	tasks.forget(cluster + "\x00" + string(id))
}

func TestTaskTrackerIsBounded(t *testing.T) {
	g := NewWithT(t)
	tr := newTaskTracker(3)
	now := time.Now()
	for _, k := range []string{"a", "b", "c", "d"} {
		tr.add(k, "Clone", now)
	}
	g.Expect(tr.len()).To(Equal(3))
	_, _, ok := tr.finish("a")
	g.Expect(ok).To(BeFalse(), "the oldest task was evicted")
	op, started, ok := tr.finish("d")
	g.Expect(ok).To(BeTrue())
	g.Expect(op).To(Equal("Clone"))
	g.Expect(started).To(Equal(now))
	g.Expect(tr.len()).To(Equal(2))
}

func TestCloseAndUnwrap(t *testing.T) {
	g := NewWithT(t)
	plain := &fakeProvider{}
	wrapped := Wrap(plain, metrics.ProviderProxmox, cluster)
	_, ok := wrapped.(interface{ Close() })
	g.Expect(ok).To(BeFalse(), "no Close to expose")
	g.Expect(wrapped.(interface{ Unwrap() hypervisor.Provider }).Unwrap()).To(BeIdenticalTo(plain))

	closing := &closingFake{}
	wrapped = Wrap(closing, metrics.ProviderProxmox, cluster)
	closer, ok := wrapped.(interface{ Close() })
	g.Expect(ok).To(BeTrue())
	closer.Close()
	g.Expect(closing.closed).To(BeTrue())
	g.Expect(wrapped.(interface{ Unwrap() hypervisor.Provider }).Unwrap()).To(BeIdenticalTo(closing))
}
