package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// PathPrefix starts every platform's route: /webhooks/github, /webhooks/gitlab,
// /webhooks/buildkite. Every other path answers 404, as does the route of a platform this
// process has no driver for.
const PathPrefix = "/webhooks/"

// Path is GitHub's route.
const Path = PathPrefix + string(platform.KindGitHub)

// PathOf is the route of a platform's webhooks.
func PathOf(kind platform.Kind) string { return PathPrefix + string(kind) }

// Defaults for Config's zero values.
const (
	// DefaultMaxBodyBytes is far above any workflow_job payload (a few KiB; GitHub's own 25 MB
	// cap is never needed for the events HyperFleet subscribes to) and small enough that the
	// bodies of DefaultMaxConcurrent requests fit in 16 MiB.
	DefaultMaxBodyBytes int64 = 256 << 10
	DefaultWorkers            = 4
	DefaultQueueSize          = 1000
	// DefaultMaxConcurrent bounds requests being read or handled at once; beyond it, a newcomer
	// takes the slot of a slow sender's request, or is answered 503.
	DefaultMaxConcurrent = 64
	// DefaultMaxConcurrentPerSource bounds one source address's (an IPv6 /64's) requests in
	// flight whose signature only the body can prove; beyond it, 429. Behind a proxy every
	// request comes from the proxy: raise it, or set -1 to turn it off.
	DefaultMaxConcurrentPerSource = 32
	// recentDeliveryIDs is how many delivery ids are remembered for dedupe.
	recentDeliveryIDs = 10000
)

// Config configures a Receiver.
type Config struct {
	// Secrets are the webhook secrets per platform, each proving deliveries to that platform's
	// route only (GitHub: the App's webhook secret; GitLab: the X-Gitlab-Token; Buildkite: the
	// webhook token or signature key). A route without a secret refuses every delivery (401): the
	// receiver fails closed.
	Secrets map[platform.Kind][]byte
	// Parsers read each platform's deliveries; nil uses the drivers registered with pkg/platform.
	Parsers map[platform.Kind]platform.WebhookParser
	// MaxBodyBytes bounds a delivery's body; larger ones answer 413. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Workers is the number of goroutines recording events. Zero means DefaultWorkers.
	Workers int
	// QueueSize bounds events accepted but not yet recorded; when full, deliveries answer 503.
	// Zero means DefaultQueueSize.
	QueueSize int
	// MaxConcurrent bounds requests in flight (503 beyond, unless a slow sender's request gives
	// way); zero means DefaultMaxConcurrent.
	MaxConcurrent int
	// MaxConcurrentPerSource bounds requests in flight per source address (an IPv6 /64) whose
	// credential only the body can verify (429 beyond); zero means
	// DefaultMaxConcurrentPerSource, negative means no bound.
	MaxConcurrentPerSource int
	// Timeouts of the listener Serve runs; zero values mean the defaults of ServerTimeouts.
	Timeouts ServerTimeouts
	// Namespace restricts routing to RunnerPools in one namespace; empty means all namespaces.
	Namespace string
	// Installations proves which App installation each pool's credentials hold. A job goes only
	// to a pool holding the installation the signed delivery names (installation.id); without
	// an InstallationSource no job is routed (fail closed).
	Installations demand.InstallationSource
	// Claims gives each job one owning pool across namespaces, shared with the pools' repair
	// loops. Required for routing, like Installations.
	Claims *demand.Claims
	// OnProcessed, if set, is called by a worker after each job event, e.g. to observe the
	// latency from receipt to ledger. It must not block.
	OnProcessed func(Processed)
}

// Processed describes one job event a worker handled.
type Processed struct {
	Event platform.JobEvent
	// Pool is the RunnerPool the job was routed to; empty when no pool matched.
	Pool types.NamespacedName
	// ReceivedAt is when the delivery arrived; the ledger records it as the transition time.
	ReceivedAt time.Time
	// Changed reports whether the ledger moved forward.
	Changed bool
	// Err is set when the event could not be recorded.
	Err error
}

// Stats are the receiver's counters since start.
type Stats struct {
	// Accepted deliveries were queued (202).
	Accepted uint64
	// Duplicates had a delivery id seen recently (200, not queued again).
	Duplicates uint64
	// Unauthorized had a missing or wrong signature or token (401).
	Unauthorized uint64
	// Malformed could not be parsed (400).
	Malformed uint64
	// TooLarge exceeded MaxBodyBytes (413).
	TooLarge uint64
	// Ignored were pings and events or actions HyperFleet does not act on (200).
	Ignored uint64
	// QueueFull were refused because the queue was full (503).
	QueueFull uint64
	// Busy were refused because MaxConcurrent requests were in flight, or gave their slot to
	// another request while their body arrived (503).
	Busy uint64
	// TooSlow sent their body slower than ServerTimeouts allow and were cut (408).
	TooSlow uint64
	// Throttled were refused because their source had MaxConcurrentPerSource requests in flight (429).
	Throttled uint64
	// Unrouted job events matched no RunnerPool and were dropped.
	Unrouted uint64
	// Recorded job events moved a ledger forward.
	Recorded uint64
	// Unchanged job events were duplicates or backward moves by the ledger's rule.
	Unchanged uint64
	// Failed job events could not be recorded (the API server failed); the repair loop recovers them.
	Failed uint64
}

type counters struct {
	accepted, duplicates, unauthorized, malformed, tooLarge, ignored, queueFull, busy, tooSlow, throttled,
	unrouted, recorded, unchanged, failed atomic.Uint64
}

// queuedEvent is a verified job event waiting for a worker.
type queuedEvent struct {
	kind       platform.Kind
	event      platform.JobEvent
	receivedAt time.Time
}

// Receiver is the webhook endpoint (ServeHTTP) and the workers that record what it accepts
// (Start). Create it with NewReceiver.
type Receiver struct {
	client  client.Client
	store   *demand.Store
	cfg     Config
	notify  func(types.NamespacedName)
	queue   chan queuedEvent
	recent  *recentDeliveries
	limits  *limiter
	stats   counters
	started atomic.Bool
	now     func() time.Time
}

// NewReceiver returns a Receiver that lists RunnerPools with c, records jobs in store and calls
// notify (may be nil) with the pool whose ledger changed, so its controller reconciles at once.
// notify runs on a worker goroutine and must not block for long.
func NewReceiver(c client.Client, store *demand.Store, cfg Config, notify func(types.NamespacedName)) *Receiver {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.MaxConcurrentPerSource == 0 {
		cfg.MaxConcurrentPerSource = DefaultMaxConcurrentPerSource
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if cfg.Parsers == nil {
		cfg.Parsers = map[platform.Kind]platform.WebhookParser{}
		for _, k := range platform.Registered() {
			d, _ := platform.Lookup(k)
			cfg.Parsers[k] = d.Webhooks
		}
	}
	return &Receiver{
		client: c, store: store, cfg: cfg, notify: notify,
		queue:  make(chan queuedEvent, cfg.QueueSize),
		recent: newRecentDeliveries(recentDeliveryIDs),
		limits: newLimiter(cfg.MaxConcurrent, cfg.MaxConcurrentPerSource),
		now:    time.Now,
	}
}

// Stats returns the counters.
func (r *Receiver) Stats() Stats {
	c := &r.stats
	return Stats{
		Accepted: c.accepted.Load(), Duplicates: c.duplicates.Load(), Unauthorized: c.unauthorized.Load(),
		Malformed: c.malformed.Load(), TooLarge: c.tooLarge.Load(), Ignored: c.ignored.Load(),
		QueueFull: c.queueFull.Load(), Busy: c.busy.Load(), TooSlow: c.tooSlow.Load(), Throttled: c.throttled.Load(),
		Unrouted: c.unrouted.Load(), Recorded: c.recorded.Load(),
		Unchanged: c.unchanged.Load(), Failed: c.failed.Load(),
	}
}

// ServeHTTP verifies and parses one delivery with the parser and secret of its route's platform,
// and queues job events for the workers. It never touches the API server: GitHub gives up after
// 10 s and does not retry, so the answer must not depend on anything slow.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	kind, ok := strings.CutPrefix(req.URL.Path, PathPrefix)
	parser := r.cfg.Parsers[platform.Kind(kind)]
	if !ok || parser == nil {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST is allowed", http.StatusMethodNotAllowed)
		return
	}
	log := ctrl.LoggerFrom(req.Context()).WithValues("platform", kind)
	received := r.now()
	// Before any slot or byte of the body is spent: a request that cannot be genuine (no
	// credential header, a wrong token) is refused, and one whose credential is proven already
	// goes ahead of those whose signature only the body can verify.
	secret := r.cfg.Secrets[platform.Kind(kind)]
	ln, err := admit(platform.Kind(kind), req.Header, secret)
	if err != nil {
		closeUnread(w)
		r.refuseUnauthorized(w, log, err)
		return
	}
	if req.ContentLength > r.cfg.MaxBodyBytes {
		r.refuseTooLarge(w, log)
		return
	}
	s := r.acquire(w, req, ln)
	if s == nil {
		return
	}
	defer s.release()

	body, err := r.readBody(w, req, s)
	if err != nil {
		s.release() // nothing of the body is kept: a newcomer waiting for the slot goes on
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			r.refuseTooLarge(w, log)
		case errors.Is(err, errEvicted):
			r.refuseBusy(w)
		case errors.Is(err, errTooSlow):
			r.stats.tooSlow.Add(1)
			metrics.WebhookDelivery(metrics.WebhookBadRequest)
			w.Header().Set("Connection", "close")
			http.Error(w, "body too slow", http.StatusRequestTimeout)
		default:
			r.stats.malformed.Add(1)
			metrics.WebhookDelivery(metrics.WebhookBadRequest)
			http.Error(w, "cannot read body", http.StatusBadRequest)
		}
		return
	}
	// Each parser verifies the delivery (signature or token, in constant time) before reading
	// anything else; an empty secret refuses everything.
	hook, err := parser.ParseWebhook(req.Header, body, secret)
	if err == nil && len(secret) == 0 {
		err = fmt.Errorf("%w: no webhook secret is configured for %s", platform.ErrInvalidSignature, kind)
	}
	if err != nil {
		status := platform.WebhookHTTPStatus(err)
		if status == http.StatusUnauthorized {
			r.refuseUnauthorized(w, log, err)
			return
		}
		r.stats.malformed.Add(1)
		metrics.WebhookDelivery(metrics.WebhookBadRequest)
		log.V(1).Info("Refused webhook", "reason", err.Error())
		http.Error(w, http.StatusText(status), status)
		return
	}
	if hook.Kind != platform.WebhookJob {
		r.stats.ignored.Add(1)
		metrics.WebhookDelivery(metrics.WebhookIgnored)
		w.WriteHeader(http.StatusOK)
		return
	}
	r.enqueue(w, platform.Kind(kind), hook, received)
}

func (r *Receiver) refuseUnauthorized(w http.ResponseWriter, log logr.Logger, err error) {
	r.stats.unauthorized.Add(1)
	metrics.WebhookDelivery(metrics.WebhookInvalidSignature)
	// V(1): anyone on the internet can post here; the counter is what to alert on.
	log.V(1).Info("Refused webhook with a bad signature", "reason", err.Error())
	http.Error(w, "invalid signature", http.StatusUnauthorized)
}

func (r *Receiver) refuseTooLarge(w http.ResponseWriter, log logr.Logger) {
	r.stats.tooLarge.Add(1)
	metrics.WebhookDelivery(metrics.WebhookTooLarge)
	log.V(1).Info("Refused oversized webhook", "limit", r.cfg.MaxBodyBytes)
	closeUnread(w)
	http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
}

func (r *Receiver) enqueue(w http.ResponseWriter, kind platform.Kind, hook platform.Webhook, received time.Time) {
	id := hook.DeliveryID
	if id != "" {
		id = string(kind) + "/" + id // delivery IDs are unique per platform only
	}
	if id != "" && !r.recent.add(id) {
		r.stats.duplicates.Add(1)
		metrics.WebhookDelivery(metrics.WebhookDuplicate)
		w.WriteHeader(http.StatusOK)
		return
	}
	select {
	case r.queue <- queuedEvent{kind: kind, event: *hook.Job, receivedAt: received}:
		r.stats.accepted.Add(1)
		w.WriteHeader(http.StatusAccepted)
	default:
		// A failed delivery shows in GitHub's UI and can be redelivered; the repair loop
		// recovers the job either way.
		if id != "" {
			r.recent.forget(id)
		}
		r.stats.queueFull.Add(1)
		metrics.WebhookDelivery(metrics.WebhookQueueFull)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "receiver busy", http.StatusServiceUnavailable)
	}
}
