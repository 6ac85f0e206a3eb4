package instrumented

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"

// Span attribute keys. error.type and http.response.status_code follow the OpenTelemetry semantic
// conventions; the others are HyperFleet's own.
const (
	AttrPlatform   = attribute.Key("hyperfleet.platform")
	AttrScope      = attribute.Key("hyperfleet.platform.scope")
	AttrJobID      = attribute.Key("hyperfleet.job.id")
	AttrJobs       = attribute.Key("hyperfleet.jobs")
	AttrRunnerID   = attribute.Key("hyperfleet.runner.id")
	AttrRunnerName = attribute.Key("hyperfleet.runner.name")
	AttrRunners    = attribute.Key("hyperfleet.runners")
	AttrErrorType  = attribute.Key("error.type")
	AttrHTTPStatus = attribute.Key("http.response.status_code")
)

// rateLimited is implemented by platform clients that know their remaining API budget
// (github.Client).
type rateLimited interface {
	RateLimitRemaining() (remaining int, ok bool)
}

// Wrap returns p with a span around every API call, hyperfleet_platform_rate_limited_total
// counting the calls the platform refused for rate limits, and, when a GitHub client reports its
// rate limit, the hyperfleet_github_rate_limit_remaining gauge updated after each call. Errors are returned
// unchanged. ParseWebhook has no context to parent a span on and makes no API call, so it is
// passed through untraced.
func Wrap(p platform.Platform) platform.Platform {
	if w, ok := p.(*wrapped); ok {
		return w // instrumented already: one span per call, never two
	}
	return &wrapped{next: p, kind: string(p.Kind()), tracer: otel.Tracer(ScopeName)}
}

// Source returns src with every platform it hands out instrumented (Wrap). Apply it once, where
// a process is assembled; callers of the Source then need not (and must not) instrument again.
// Installation passes through: a proof of installation is cached by the platform client and is
// not one of the traced API calls.
func Source(src platform.Source) platform.Source {
	if s, ok := src.(*source); ok {
		return s
	}
	return &source{next: src}
}

type source struct{ next platform.Source }

func (s *source) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	p, scope, err := s.next.Platform(ctx, pool)
	if err != nil {
		return nil, scope, err
	}
	return Wrap(p), scope, nil
}

func (s *source) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	return s.next.Installation(ctx, pool)
}

type wrapped struct {
	next   platform.Platform
	kind   string
	tracer trace.Tracer
}

// Unwrap returns the wrapped platform, for callers that need its concrete type.
func (w *wrapped) Unwrap() platform.Platform { return w.next }

// RateLimitRemaining passes the wrapped client's rate limit through; ok is false when it has none.
func (w *wrapped) RateLimitRemaining() (int, bool) {
	if rl, ok := w.next.(rateLimited); ok {
		return rl.RateLimitRemaining()
	}
	return 0, false
}

func (w *wrapped) begin(ctx context.Context, op string, scope platform.Scope, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, AttrPlatform.String(w.kind), AttrScope.String(scope.String()))
	return w.tracer.Start(ctx, "platform."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (w *wrapped) end(span trace.Span, err error, attrs ...attribute.KeyValue) {
	if err != nil {
		attrs = append(attrs, AttrErrorType.String(errorClass(err)))
		var pe *platform.Error
		if errors.As(err, &pe) && pe.StatusCode != 0 {
			attrs = append(attrs, AttrHTTPStatus.Int(pe.StatusCode))
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attrs...)
	span.End()
	if errors.Is(err, platform.ErrRateLimited) {
		metrics.PlatformRateLimit(w.kind)
	}
	if n, ok := w.RateLimitRemaining(); ok && w.kind == string(platform.KindGitHub) {
		metrics.SetGitHubRateLimit(n)
	}
}

func (w *wrapped) Kind() platform.Kind { return w.next.Kind() }

func (w *wrapped) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return w.next.ParseWebhook(header, body, secret)
}

func (w *wrapped) QueuedJobs(ctx context.Context, scope platform.Scope) ([]platform.Job, error) {
	ctx, span := w.begin(ctx, "QueuedJobs", scope)
	jobs, err := w.next.QueuedJobs(ctx, scope)
	w.end(span, err, AttrJobs.Int(len(jobs)))
	return jobs, err
}

func (w *wrapped) GetJob(ctx context.Context, scope platform.Scope, jobID string) (platform.Job, error) {
	ctx, span := w.begin(ctx, "GetJob", scope, AttrJobID.String(jobID))
	job, err := w.next.GetJob(ctx, scope, jobID)
	w.end(span, err)
	return job, err
}

func (w *wrapped) Register(ctx context.Context, scope platform.Scope, spec platform.RunnerSpec) (platform.Registration, error) {
	ctx, span := w.begin(ctx, "Register", scope, AttrRunnerName.String(spec.Name))
	reg, err := w.next.Register(ctx, scope, spec)
	var attrs []attribute.KeyValue
	if reg.ID != "" {
		attrs = append(attrs, AttrRunnerID.String(reg.ID))
	}
	w.end(span, err, attrs...)
	return reg, err
}

func (w *wrapped) ListRunners(ctx context.Context, scope platform.Scope) ([]platform.Runner, error) {
	ctx, span := w.begin(ctx, "ListRunners", scope)
	runners, err := w.next.ListRunners(ctx, scope)
	w.end(span, err, AttrRunners.Int(len(runners)))
	return runners, err
}

func (w *wrapped) RemoveRunner(ctx context.Context, scope platform.Scope, runnerID string) error {
	ctx, span := w.begin(ctx, "RemoveRunner", scope, AttrRunnerID.String(runnerID))
	err := w.next.RemoveRunner(ctx, scope, runnerID)
	w.end(span, err)
	return err
}

func (w *wrapped) RemoveRunnerByName(ctx context.Context, scope platform.Scope, name string) error {
	ctx, span := w.begin(ctx, "RemoveRunnerByName", scope, AttrRunnerName.String(name))
	err := w.next.RemoveRunnerByName(ctx, scope, name)
	w.end(span, err)
	return err
}

// errorClass names a platform error's class, CamelCase like hypervisor.Reason.
func errorClass(err error) string {
	for _, c := range []struct {
		err   error
		class string
	}{
		{platform.ErrRateLimited, "RateLimited"},
		{platform.ErrUnauthorized, "Unauthorized"},
		{platform.ErrNotFound, "NotFound"},
		{platform.ErrConflict, "Conflict"},
		{platform.ErrRunnerBusy, "RunnerBusy"},
		{platform.ErrInvalid, "Invalid"},
		{platform.ErrTransient, "Transient"},
		{platform.ErrInvalidSignature, "InvalidSignature"},
		{platform.ErrMalformedWebhook, "MalformedWebhook"},
	} {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return "Error"
}
