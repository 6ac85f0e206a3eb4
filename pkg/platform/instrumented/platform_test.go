package instrumented

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr
}

// newPlatform wraps a GitHub client of a fake GitHub API with the App installed on "acme".
func newPlatform(t *testing.T, opts fakegithub.Options) (*fakegithub.Server, *github.Client, platform.Platform) {
	t.Helper()
	fake := fakegithub.StartForTest(t, opts)
	fake.InstallationID("acme")
	c, err := github.NewClient(github.Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM()})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c, Wrap(c)
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestCallsAreTracedAndRateLimitPublished(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	fake, client, p := newPlatform(t, fakegithub.Options{RateLimit: 100})
	ctx := context.Background()
	repo := platform.Scope{Repository: "acme/api"}
	job := fake.CreateJob("acme/api", []string{"self-hosted", "linux"}, fakegithub.WithoutQueuedWebhook())

	reg, err := p.Register(ctx, repo, platform.RunnerSpec{Name: "hf-linux-1", Labels: []string{"linux"}})
	id := reg.ID
	g.Expect(err).NotTo(HaveOccurred())
	runners, err := p.ListRunners(ctx, repo)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runners).To(HaveLen(1))
	jobs, err := p.QueuedJobs(ctx, repo)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(1))
	_, err = p.GetJob(ctx, repo, strconv.FormatInt(job.ID, 10))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.RemoveRunner(ctx, repo, id)).To(Succeed())
	g.Expect(p.RemoveRunnerByName(ctx, repo, "hf-gone")).To(Succeed())
	g.Expect(fake.Runners()).To(BeEmpty())

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byName[s.Name()] = s
		g.Expect(attrsOf(s)).To(HaveKeyWithValue(AttrPlatform, attribute.StringValue("github")))
		g.Expect(attrsOf(s)).To(HaveKeyWithValue(AttrScope, attribute.StringValue("acme/api")))
		g.Expect(s.Status().Code).To(Equal(codes.Unset))
	}
	g.Expect(byName).To(HaveLen(6))
	g.Expect(attrsOf(byName["platform.Register"])).To(HaveKeyWithValue(AttrRunnerName, attribute.StringValue("hf-linux-1")))
	g.Expect(attrsOf(byName["platform.Register"])).To(HaveKeyWithValue(AttrRunnerID, attribute.StringValue(id)))
	g.Expect(attrsOf(byName["platform.ListRunners"])).To(HaveKeyWithValue(AttrRunners, attribute.IntValue(1)))
	g.Expect(attrsOf(byName["platform.QueuedJobs"])).To(HaveKeyWithValue(AttrJobs, attribute.IntValue(1)))
	g.Expect(attrsOf(byName["platform.GetJob"])).To(HaveKeyWithValue(AttrJobID, attribute.StringValue(strconv.FormatInt(job.ID, 10))))

	remaining, ok := client.RateLimitRemaining()
	g.Expect(ok).To(BeTrue())
	g.Expect(remaining).To(BeNumerically("<", 100))
	g.Expect(testutil.ToFloat64(metrics.GitHubRateLimitRemaining)).To(Equal(float64(remaining)))
	wrappedRemaining, ok := p.(interface{ RateLimitRemaining() (int, bool) }).RateLimitRemaining()
	g.Expect(ok).To(BeTrue())
	g.Expect(wrappedRemaining).To(Equal(remaining))
}

func TestErrorsPassThroughUnchanged(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	fake, _, p := newPlatform(t, fakegithub.Options{})
	fake.FailNext(fakegithub.EndpointRepoRunners, 1, http.StatusServiceUnavailable)

	_, err := p.ListRunners(context.Background(), platform.Scope{Repository: "acme/api"})
	g.Expect(errors.Is(err, platform.ErrTransient)).To(BeTrue(), "%v", err)
	g.Expect(platform.IsRetryable(err)).To(BeTrue())
	_, err = p.ListRunners(context.Background(), platform.Scope{Organization: "globex"})
	g.Expect(errors.Is(err, platform.ErrNotFound)).To(BeTrue(), "the App is not installed there: %v", err)

	spans := sr.Ended()
	g.Expect(spans).To(HaveLen(2))
	g.Expect(spans[0].Status().Code).To(Equal(codes.Error))
	g.Expect(attrsOf(spans[0])).To(HaveKeyWithValue(AttrErrorType, attribute.StringValue("Transient")))
	g.Expect(attrsOf(spans[0])).To(HaveKeyWithValue(AttrHTTPStatus, attribute.IntValue(http.StatusServiceUnavailable)))
	g.Expect(attrsOf(spans[1])).To(HaveKeyWithValue(AttrErrorType, attribute.StringValue("NotFound")))
}

// TestRateLimitsAreCounted: calls GitHub refuses for its primary (403 with X-RateLimit-Remaining:
// 0) or secondary (429 with Retry-After) limits come back as platform.ErrRateLimited with the time
// to come back, and each counts once in hyperfleet_platform_rate_limited_total{platform="github"};
// other failures do not count.
func TestRateLimitsAreCounted(t *testing.T) {
	g := NewWithT(t)
	recordSpans(t)
	ctx := context.Background()
	repo := platform.Scope{Repository: "acme/api"}
	counter := metrics.PlatformRateLimited.WithLabelValues("github")
	before := testutil.ToFloat64(counter)

	fake, _, p := newPlatform(t, fakegithub.Options{})
	fake.InjectFault(fakegithub.EndpointRepoRunners, fakegithub.Fault{Times: 1, Status: http.StatusTooManyRequests, RetryAfter: 30 * time.Second})
	_, err := p.ListRunners(ctx, repo)
	g.Expect(err).To(MatchError(platform.ErrRateLimited))
	at, ok := platform.RetryAt(err)
	g.Expect(ok).To(BeTrue(), "the secondary limit's Retry-After is kept: %v", err)
	g.Expect(at).To(BeTemporally("~", time.Now().Add(30*time.Second), 5*time.Second))
	g.Expect(testutil.ToFloat64(counter)).To(Equal(before + 1))

	fake.FailNext(fakegithub.EndpointRepoRunners, 1, http.StatusServiceUnavailable)
	_, err = p.ListRunners(ctx, repo)
	g.Expect(err).To(MatchError(platform.ErrTransient))
	g.Expect(testutil.ToFloat64(counter)).To(Equal(before+1), "a 503 is not a rate limit")

	// The primary limit: a 403 with X-RateLimit-Remaining: 0. The client then refuses further
	// calls itself until the reset, without a request; each refusal counts too.
	fake, _, p = newPlatform(t, fakegithub.Options{})
	fake.InjectFault(fakegithub.EndpointRepoRunners, fakegithub.Fault{Times: 1, RateLimited: true, RetryAfter: 10 * time.Minute})
	_, err = p.ListRunners(ctx, repo)
	g.Expect(err).To(MatchError(platform.ErrRateLimited))
	at, ok = platform.RetryAt(err)
	g.Expect(ok).To(BeTrue(), "the primary limit's reset time is kept: %v", err)
	g.Expect(at).To(BeTemporally("~", time.Now().Add(10*time.Minute), 5*time.Second))
	g.Expect(testutil.ToFloat64(counter)).To(Equal(before + 2))
	_, err = p.ListRunners(ctx, repo)
	g.Expect(err).To(MatchError(platform.ErrRateLimited))
	g.Expect(testutil.ToFloat64(counter)).To(Equal(before + 3))
}

func TestWebhooksAndKindPassThrough(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	_, client, p := newPlatform(t, fakegithub.Options{})
	g.Expect(p.Kind()).To(Equal(platform.KindGitHub))
	g.Expect(p.(interface{ Unwrap() platform.Platform }).Unwrap()).To(BeIdenticalTo(client))

	header := http.Header{"X-Github-Event": {"workflow_job"}, "X-Hub-Signature-256": {"sha256=00"}}
	_, err := p.ParseWebhook(header, []byte(`{}`), []byte("secret"))
	g.Expect(errors.Is(err, platform.ErrInvalidSignature)).To(BeTrue(), "%v", err)
	g.Expect(sr.Ended()).To(BeEmpty(), "webhook parsing is local and has no context to trace")
}

// fixedSource hands out one platform and installation, counting calls.
type fixedSource struct {
	p             platform.Platform
	installations int
}

func (f *fixedSource) Platform(context.Context, *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	return f.p, platform.Scope{Repository: "acme/api"}, nil
}

func (f *fixedSource) Installation(context.Context, *fleetv1.RunnerPool) (string, error) {
	f.installations++
	return "42", nil
}

// TestSourceInstrumentsOnce: the Source wrapper applied where a process is assembled traces each
// call once, however often it or Wrap is applied again; proofs of installation pass through.
func TestSourceInstrumentsOnce(t *testing.T) {
	g := NewWithT(t)
	sr := recordSpans(t)
	_, client, _ := newPlatform(t, fakegithub.Options{})
	inner := &fixedSource{p: client}
	src := Source(Source(inner))
	g.Expect(Source(src)).To(BeIdenticalTo(src))
	ctx := context.Background()
	pool := &fleetv1.RunnerPool{}

	p, scope, err := src.Platform(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Wrap(p)).To(BeIdenticalTo(p), "an instrumented platform is not wrapped again")
	g.Expect(p.(interface{ Unwrap() platform.Platform }).Unwrap()).To(BeIdenticalTo(client))
	_, err = Wrap(p).ListRunners(ctx, scope)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sr.Ended()).To(HaveLen(1))
	g.Expect(sr.Ended()[0].Name()).To(Equal("platform.ListRunners"))

	id, err := src.Installation(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal("42"))
	g.Expect(inner.installations).To(Equal(1))
	g.Expect(sr.Ended()).To(HaveLen(1), "a proof of installation is not a traced call")
}
