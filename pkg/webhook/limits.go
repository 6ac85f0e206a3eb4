package webhook

import (
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// Results of deliveries refused by the load limits, as webhook delivery metrics.
const (
	metricBusy      = "busy"
	metricThrottled = "throttled"
)

// limiter bounds the requests whose bodies are being read or handled at once, overall and per
// source address. Anyone on the internet can reach the receiver, and a request holds up to
// MaxBodyBytes of memory while its body arrives (slowly, if the sender wishes): without a bound,
// a few hundred slow senders would exhaust the manager's memory and every controller with it.
type limiter struct {
	all       chan struct{}
	perSource int

	mu      sync.Mutex
	sources map[string]int
}

func newLimiter(max, perSource int) *limiter {
	return &limiter{all: make(chan struct{}, max), perSource: perSource, sources: map[string]int{}}
}

// source is the request's peer address without the port. Behind a proxy it is the proxy's;
// forwarded headers are not trusted, since anyone can set them.
func source(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// acquire takes a slot for req, or answers 429 (this source has too many requests in flight) or
// 503 (the receiver has too many) and returns false. Deliveries are small and fast; GitHub's
// bursts fit well within the limits.
func (r *Receiver) acquire(w http.ResponseWriter, req *http.Request) (release func(), ok bool) {
	l := r.limits
	src := source(req)
	l.mu.Lock()
	if l.perSource > 0 && l.sources[src] >= l.perSource {
		l.mu.Unlock()
		r.stats.throttled.Add(1)
		metrics.WebhookDelivery(metricThrottled)
		refuseUnread(w)
		http.Error(w, "too many concurrent requests from your address", http.StatusTooManyRequests)
		return nil, false
	}
	l.sources[src]++
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.sources[src]--; l.sources[src] <= 0 {
			delete(l.sources, src)
		}
	}
	select {
	case l.all <- struct{}{}:
		return func() { <-l.all; drop() }, true
	default:
		drop()
		r.stats.busy.Add(1)
		metrics.WebhookDelivery(metricBusy)
		refuseUnread(w)
		http.Error(w, "receiver busy", http.StatusServiceUnavailable)
		return nil, false
	}
}

// retryAfterSeconds is what refused senders are told to wait.
const retryAfterSeconds = 1

// refuseUnread prepares the answer to a request whose body is not read: the connection is closed
// after it, or the server would first read (and wait for) up to 256 KiB of the unwanted body.
func refuseUnread(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	w.Header().Set("Connection", "close")
}
